-- leave_ring(K, user): take a user out of the ring (no ready work, or held out by its
-- cap) and forget the turns it used in the current round.
local function leave_ring(K, user)
  redis.call('ZREM', K.ring, user)
  redis.call('HDEL', K.turns, user)
end
