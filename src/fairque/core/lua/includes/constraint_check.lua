-- @include keys
-- constraint_check(K, cons, ms, now_us): may a task in the constraint buckets `cons` (the task
-- hash's JSON array) start now? Returns the plan for constraint_take, or nil, the
-- first bucket at its limit and when (ms) that limit frees: a rate limit's next GCRA
-- slot, a concurrency limit's earliest lease deadline (its use is counted from
-- unexpired leases, pruned here). A bucket whose constraint was removed limits nothing.
-- A rate's schedule (the GCRA's arrival time) is kept through a start that comes less
-- than a quarter interval after its slot: any window of W seconds still holds at most
-- (W + interval / 4) / interval + burst starts, and a steady stream of slightly late
-- starts runs at the rate, not under it.
local function constraint_check(K, cons, ms, now_us)
  local plan = {}
  for _, b in ipairs(cjson.decode(cons)) do
    local cid = string.match(b, '^[^:]+')
    local raw = redis.call('HGET', K.constraints, cid)
    if raw then
      local d = cjson.decode(raw)
      local tat = 0
      if d.interval_us > 0 then
        -- a start less than a quarter interval late keeps its slot in the schedule,
        -- so the rate holds on average instead of losing each late start's delay
        tat = tonumber(redis.call('GET', constraint_rate_key(K, b)) or '0')
        if tat < now_us - d.interval_us / 4 then tat = now_us end
        if tat - now_us > d.tau_us then
          return nil, b, math.ceil((tat - d.tau_us) / 1000)
        end
      end
      if d.limit > 0 then
        local hk = constraint_held_key(K, b)
        redis.call('ZREMRANGEBYSCORE', hk, '-inf', ms)
        if redis.call('ZCARD', hk) >= d.limit then
          return nil, b, tonumber(redis.call('ZRANGE', hk, 0, 0, 'WITHSCORES')[2])
        end
      end
      plan[#plan + 1] = {b, cid, d.interval_us, tat, d.limit}
    end
  end
  return plan
end
