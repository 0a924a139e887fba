-- @include keys
-- has_ready(K, user): true when the user has anything in either lane.
local function has_ready(K, user)
  return redis.call('LLEN', critical_key(K, user)) > 0
    or redis.call('ZCARD', normal_key(K, user)) > 0
end
