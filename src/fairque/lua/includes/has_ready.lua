-- has_ready(prefix, user): true when the user has anything in either lane.
local function has_ready(prefix, user)
  return redis.call('LLEN', prefix .. 'crit:' .. user) > 0
    or redis.call('ZCARD', prefix .. 'norm:' .. user) > 0
end
