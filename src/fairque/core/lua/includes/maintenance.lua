-- @include due_by
-- @include keys
-- @include has_ready
-- @include ring_join
-- @include signal_wake
-- @include lane_score
-- @include intake_head
-- @include task_stock
-- maintenance(K, ms, limit, base_ms, failed_ttl_ms, ordering, horizon_us, due): a lease
-- call's upkeep: place the intake's first tasks (place_intake), reclaim up to `limit`
-- expired leases (reclaim_expired) and promote up to `limit` due SCHEDULED tasks
-- (promote_due). `due`: the queue's 'due' hint as the caller read it (see due_by): until
-- then no lease expires and no scheduled task is due, so the usual call reads no
-- registry. A call past it reads both, does what is due and sets the hint again: to
-- the first lease deadline or due time left (one read of each registry's head), or
-- absent when it stopped at `limit` (the next call goes on). Returns whether it placed
-- or looked (the caller then reads the queue's counters again). The functions
-- that do the work are made only when there is some (a script makes every function it
-- defines on each run, about 500 instructions each and as much again for each outer
-- function it uses).
local DUE_NEVER = '4503599627370496'  -- 2^52 ms: nothing leased or scheduled
local function maintenance(K, ms, limit, base_ms, failed_ttl_ms, ordering, horizon_us, due)
  local entries = intake_head(K)
  local placed = #entries > 0
  if placed then
-- @include place_intake
    place_intake(K, ordering, horizon_us, entries)
  end
  if due and ms < due + 0 then return placed end
  local expired = redis.call('ZRANGEBYSCORE', K.leases, '-inf', ms, 'LIMIT', 0, limit)
  if #expired > 0 then
-- @include reclaim_expired
    reclaim_expired(K, ms, limit, base_ms, failed_ttl_ms, expired)
  end
  local ready = redis.call('ZRANGEBYSCORE', K.delayed, '-inf', ms, 'WITHSCORES', 'LIMIT', 0,
    limit)
  if #ready > 0 then
-- @include promote_due
    promote_due(K, ms, limit, ordering, horizon_us, ready)
  end
  if #expired >= limit or #ready >= 2 * limit then
    redis.call('HDEL', K.meta, 'due')
    return true
  end
  local first = DUE_NEVER + 0
  for _, key in ipairs({K.leases, K.delayed}) do
    local head = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    if head[2] and head[2] + 0 < first then first = head[2] + 0 end
  end
  redis.call('HSET', K.meta, 'due', string.format('%d', first))
  return true
end
