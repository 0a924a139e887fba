-- @include fair_join_tag
-- @include ring_count
-- ring_join(K, user, held_out): put a user with ready work into the ring, unless it is
-- already there or held out by its in-flight cap: at the tail (count mode), or at its
-- start tag (time mode, fair_join_tag; `held_out`: the slots of the cap that held it out
-- until now, nil for none). On a counted queue (groups, shares) the user is counted in
-- the ring's sums (ring_count).
local function ring_join(K, user, held_out)
  if redis.call('ZSCORE', K.ring, user) then return end
  if redis.call('SISMEMBER', K.capped, user) == 1 then return end
  local m = redis.call('HMGET', K.meta, 'fair', 'floor', 'joined', 'counted', 'max_lead')
  if m[4] then ring_count(K, user, true) end
  if fair_timed(m[1]) then
    local tag, joined = fair_join_tag(K, user, tonumber(m[2] or '0'), tonumber(m[3] or '-1'),
      m[5], held_out)
    redis.call('ZADD', K.ring, string.format('%d', tag), user)
    if joined then redis.call('HSET', K.meta, 'joined', string.format('%d', joined)) end
    return
  end
  local clock = redis.call('HINCRBY', K.meta, 'clock', 1)
  redis.call('ZADD', K.ring, clock, user)
end
