-- ring_join(K, user): put a user with ready work at the tail of the ring,
-- unless it is already there or held out by its in-flight cap.
local function ring_join(K, user)
  if redis.call('ZSCORE', K.ring, user) then return end
  if redis.call('SISMEMBER', K.capped, user) == 1 then return end
  local clock = redis.call('HINCRBY', K.meta, 'clock', 1)
  redis.call('ZADD', K.ring, clock, user)
end
