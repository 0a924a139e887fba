-- @include keys
-- @include constraint_release
-- @include signal_wake
-- constraint_due(K, ms, now_us, limit): for up to `limit` constraint buckets that are due, put
-- back into their lanes as many parked tasks as the limits let start now, and make the
-- bucket due again when the next can (or forget it once nothing is parked).
local function constraint_due(K, ms, now_us, limit)
  local due = redis.call('ZRANGEBYSCORE', K.constraint_due, '-inf', ms, 'LIMIT', 0, limit)
  local moved = 0
  for _, b in ipairs(due) do
    local waiting = redis.call('ZCARD', constraint_parked_key(K, b))
    local n, next_at = waiting, ms + 1000
    local raw = redis.call('HGET', K.constraints, string.match(b, '^[^:]+'))
    if raw and waiting > 0 then
      local d = cjson.decode(raw)
      next_at = 0
      if d.interval_us > 0 then
        -- the schedule kept through a slightly late start, as constraint_check keeps it
        local tat = tonumber(redis.call('GET', constraint_rate_key(K, b)) or '0')
        if tat < now_us - d.interval_us / 4 then tat = now_us end
        local k = math.max(0, math.floor((now_us + d.tau_us - tat) / d.interval_us) + 1)
        n = math.min(n, k)
        next_at = math.ceil((tat + k * d.interval_us - d.tau_us) / 1000)
      end
      if d.limit > 0 then
        local hk = constraint_held_key(K, b)
        redis.call('ZREMRANGEBYSCORE', hk, '-inf', ms)
        n = math.min(n, math.max(0, d.limit - redis.call('ZCARD', hk)))
        local head = redis.call('ZRANGE', hk, 0, 0, 'WITHSCORES')[2]
        next_at = math.max(next_at, head and tonumber(head) or ms + 1000)
      end
    end
    n = math.min(n, 100)
    moved = moved + constraint_release(K, b, n)
    if waiting > n then
      redis.call('ZADD', K.constraint_due, math.max(next_at, ms + 1), b)
    else
      redis.call('ZREM', K.constraint_due, b)
    end
  end
  if moved > 0 then signal_wake(K, moved) end
  return moved
end
