-- @include keys
-- @include task_stock
-- @include enqueue_ready
-- promote_due(K, ms, limit, ordering, horizon_us, due): move up to `limit` due
-- SCHEDULED tasks into their users' lanes; returns how many moved. `due`: the caller's
-- read of them (ZRANGEBYSCORE delayed -inf ms WITHSCORES LIMIT 0 limit), or nil.
local function promote_due(K, ms, limit, ordering, horizon_us, due)
  due = due or redis.call('ZRANGEBYSCORE', K.delayed, '-inf', ms, 'WITHSCORES', 'LIMIT', 0,
    limit)
  for i = 1, #due, 2 do
    local id = due[i]
    local at = tonumber(due[i + 1])
    redis.call('ZREM', K.delayed, id)
    local f = redis.call('HMGET', task_key(K, id), 'user', 'prio')
    if f[1] then
      local prio = tonumber(f[2] or task_stock())
      enqueue_ready(K, id, f[1], prio, at * 1000, ms, ordering, horizon_us)
    end
  end
  return #due / 2
end
