-- forget_workers(workers, seen, ms, limit): remove up to `limit` workers whose
-- registration expired before `ms`; returns how many.
local function forget_workers(workers, seen, ms, limit)
  local stale = redis.call('ZRANGEBYSCORE', seen, '-inf', ms, 'LIMIT', 0, limit)
  for _, id in ipairs(stale) do
    redis.call('HDEL', workers, id)
    redis.call('ZREM', seen, id)
  end
  return #stale
end
