-- @include keys
-- @include constraint_release
-- @include signal_wake
-- constraint_due(K, ms, now_us, limit): for up to `limit` constraint buckets that are due, put
-- back into their lanes as many parked tasks as the limits let start now, and make the
-- bucket due again when the next can (or forget it once nothing is parked). A rate's
-- next slot is kept to the microsecond (a fraction of a ms in the due set), so the
-- workers that wait for it come on time.
local function constraint_due(K, ms, now_us, limit)
  local now_ms = now_us / 1000
  local due = redis.call('ZRANGEBYSCORE', K.constraint_due, '-inf', now_ms, 'LIMIT', 0, limit)
  local moved = 0
  for _, b in ipairs(due) do
    local waiting = redis.call('ZCARD', constraint_parked_key(K, b))
    local n, next_at = waiting, ms + 1000
    local raw = redis.call('HGET', K.constraints, string.match(b, '^[^:]+'))
    if raw and waiting > 0 then
      local d = cjson.decode(raw)
      next_at = 0
      if d.interval_us > 0 then
        -- the GCRA's schedule, as constraint_check reads it
        local tat = math.max(tonumber(redis.call('GET', constraint_rate_key(K, b)) or '0'), now_us)
        local k = math.max(0, math.floor((now_us + d.tau_us - tat) / d.interval_us) + 1)
        n = math.min(n, k)
        next_at = (tat + k * d.interval_us - d.tau_us) / 1000
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
      redis.call('ZADD', K.constraint_due, math.max(next_at, now_ms + 0.001), b)
    else
      redis.call('ZREM', K.constraint_due, b)
    end
  end
  if moved > 0 then signal_wake(K, moved) end
  return moved
end
