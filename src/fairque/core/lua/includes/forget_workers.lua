-- forget_workers(K, ms, limit): remove up to `limit` workers whose registration
-- expired before `ms`; returns how many.
local function forget_workers(K, ms, limit)
  local stale = redis.call('ZRANGEBYSCORE', K.workers_seen, '-inf', ms, 'LIMIT', 0, limit)
  for _, id in ipairs(stale) do
    redis.call('HDEL', K.workers, id)
    redis.call('ZREM', K.workers_seen, id)
  end
  return #stale
end
