-- @include keys
-- @include fair_timed
-- fair_charge(K, user, delta): move a user's start tag by `delta` virtual ms, never
-- below the floor: its ring score when it is in the ring, else its saved tag. The
-- usual case (in the ring, charged more) is one command.
local function fair_charge(K, user, delta)
  if delta == 0 then return end
  local tag = redis.call('ZADD', K.ring, 'XX', 'INCR', delta, user)
  if tag and delta > 0 then return end
  local floor = tonumber(redis.call('HGET', K.meta, 'floor') or '0')
  if tag then
    if tonumber(tag) < floor then redis.call('ZADD', K.ring, 'XX', floor, user) end
    return
  end
  local tk = tenant_key(K, user)
  local saved = tonumber(redis.call('HGET', tk, 'tag') or '0')
  redis.call('HSET', tk, 'tag', math.max(math.max(saved, floor) + delta, floor))
end
