-- @include keys
-- @include has_ready
-- @include ring_join
-- @include signal_wake
-- @include observe
-- @include lane_score
-- @include intake_head
-- maintenance(K, ms, limit, base_ms, failed_ttl_ms, ordering, horizon_us): a lease
-- call's upkeep: place the intake's first tasks (place_intake), reclaim up to `limit`
-- expired leases (reclaim_expired) and promote up to `limit` due SCHEDULED tasks
-- (promote_due). Most calls find neither; the functions
-- that do the work are made only when there is some (a script makes every function it
-- defines on each run, about 500 instructions each and as much again for each outer
-- function it uses).
local function maintenance(K, ms, limit, base_ms, failed_ttl_ms, ordering, horizon_us)
  local entries = intake_head(K)
  if #entries > 0 then
-- @include place_intake
    place_intake(K, ordering, horizon_us, entries)
  end
  local expired = redis.call('ZRANGEBYSCORE', K.leases, '-inf', ms, 'LIMIT', 0, limit)
  if #expired > 0 then
-- @include reclaim_expired
    reclaim_expired(K, ms, limit, base_ms, failed_ttl_ms, expired)
  end
  local due = redis.call('ZRANGEBYSCORE', K.delayed, '-inf', ms, 'WITHSCORES', 'LIMIT', 0,
    limit)
  if #due > 0 then
-- @include promote_due
    promote_due(K, ms, limit, ordering, horizon_us, due)
  end
end
