-- now(): server time as {ms, us}; the only clock fairque trusts.
local function now()
  local t = redis.call('TIME')
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  return math.floor(us / 1000), us
end
