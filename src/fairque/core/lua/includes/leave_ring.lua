-- @include keys
-- @include ring_count
-- leave_ring(K, user, tag, grouped): take a user out of the ring (no ready work, or held
-- out by its cap). Count mode forgets the turns it used in the current round (`tag`
-- false); time mode keeps its start tag for its return (`tag` a number). nil (the caller
-- does not know the mode): both, saving its ring score only when the user has been
-- served before (it is in 'active'). `counted`: whether the queue's ring is counted
-- (meta 'counted': groups or shares; nil: read here): a user that leaves the ring leaves
-- its sums (ring_count).
local function leave_ring(K, user, tag, counted)
  if tag == nil then
    tag = redis.call('ZSCORE', K.ring, user)
    if tag and not redis.call('ZSCORE', K.active, user) then tag = false end
    redis.call('HDEL', K.turns, user)
  elseif not tag then
    redis.call('HDEL', K.turns, user)
  end
  if redis.call('ZREM', K.ring, user) == 1 then
    if counted == nil then counted = redis.call('HGET', K.meta, 'counted') end
    if counted then ring_count(K, user, false) end
  end
  if tag then
    if type(tag) == 'number' then tag = string.format('%d', tag) end
    redis.call('HSET', tenant_key(K, user), 'tag', tag)
  end
end
