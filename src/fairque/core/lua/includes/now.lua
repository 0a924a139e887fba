-- now(): server time as {ms, us}; the only clock fairque trusts.
local function now()
  local t = redis.call('TIME')
  local us = t[1] * 1000000 + t[2]  -- Lua's own string coercion: cheaper than tonumber
  return math.floor(us / 1000), us
end
