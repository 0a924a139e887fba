-- @include keys
-- @include fair_timed
-- fair_charge(K, user, delta): move a user's start tag by `delta` virtual us (an
-- integer): its ring score when it is in the ring, else its saved tag; one command
-- either way when it is in the ring. A correction needs no floor: the tag it moves was
-- at least the floor when the lease was charged, and a lease costs at least FAIR_MIN.
-- A saved tag that the floor passes meanwhile is raised to it when its user rejoins
-- (fair_join_tag): a debt left on it is forgiven, at most one task's estimate error.
local function fair_charge(K, user, delta)
  if delta == 0 then return end
  if redis.call('ZADD', K.ring, 'XX', 'INCR', delta, user) then return end
  redis.call('HINCRBY', tenant_key(K, user), 'tag', delta)
end
