-- ring_join(prefix, user): put a user with ready work at the tail of the ring,
-- unless it is already there or held out by its in-flight cap.
local function ring_join(prefix, user)
  if redis.call('ZSCORE', prefix .. 'ring', user) then return end
  if redis.call('SISMEMBER', prefix .. 'capped', user) == 1 then return end
  local clock = redis.call('HINCRBY', prefix .. 'meta', 'clock', 1)
  redis.call('ZADD', prefix .. 'ring', clock, user)
end
