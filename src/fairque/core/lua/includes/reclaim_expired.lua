-- @include fail_attempt
-- reclaim_expired(K, ms, limit, base_ms, failed_ttl_ms, expired): treat up to `limit`
-- expired leases as failed attempts (retry or FAILED); returns how many. `expired`: the
-- caller's read of them (ZRANGEBYSCORE leases -inf ms LIMIT 0 limit), or nil.
local function reclaim_expired(K, ms, limit, base_ms, failed_ttl_ms, expired)
  expired = expired or redis.call('ZRANGEBYSCORE', K.leases, '-inf', ms, 'LIMIT', 0, limit)
  for _, id in ipairs(expired) do
    redis.call('HINCRBY', K.stats, 'reclaimed', 1)
    fail_attempt(K, id, 'lease expired', true, ms, base_ms, failed_ttl_ms, -1, nil, -1)
  end
  return #expired
end
