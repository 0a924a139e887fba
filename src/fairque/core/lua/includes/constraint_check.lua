-- @include keys
-- constraint_check(K, cons, ms, now_us, cost): may a task of `cost` slots and tokens (a
-- number) in the constraint buckets `cons` (the task hash's JSON array) start now?
-- Returns the plan for constraint_take, or nil, the first bucket at its limit and when
-- (ms) that limit frees: a rate limit's next GCRA
-- slot (to the microsecond: a fraction of a ms), a concurrency limit's earliest lease
-- deadline (its use is counted from unexpired leases, pruned here). A bucket whose
-- constraint was removed limits nothing.
-- A rate is a GCRA: a start never comes before its slot, and a late start moves the
-- schedule to itself, so no window of W seconds holds more than floor(W / interval) +
-- burst starts. The rate is reached by workers that wait for the slot on their own
-- clock (the refusal says when it is), not by letting a late start pull the next one
-- early.
-- A task of cost N takes N tokens: it may start while the schedule is at most the
-- burst's allowance less N - 1 intervals ahead of now (and always once the schedule has
-- come to now: a task dearer than the burst starts alone), and moves the schedule N
-- intervals on. It takes N slots of a concurrency limit (at most the limit: a task
-- dearer than the limit starts only when nothing else holds the bucket).
-- A global bucket with tasks parked lets them go first, in its fair order
-- (constraint_order): another task of it waits too, unless it is one of those let go
-- (`released`: the bucket it came back from, nil for none). The plan's sixth entry is
-- true for a global bucket the task takes a tag in as it starts (not the one it came
-- back from: it has its tag there).
local function constraint_check(K, cons, ms, now_us, cost, released)
  local plan = {}
  for _, b in ipairs(cjson.decode(cons)) do
    local cid = string.match(b, '^[^:]+')
    local raw = redis.call('HGET', K.constraints, cid)
    if raw then
      local global = cid == b and b ~= released
      if global and redis.call('EXISTS', constraint_parked_key(K, b)) == 1 then
        return nil, b, tonumber(redis.call('ZSCORE', K.constraint_due, b) or ms)
      end
      local d = cjson.decode(raw)
      local tat = 0
      if d.interval_us > 0 then
        tat = math.max(tonumber(redis.call('GET', constraint_rate_key(K, b)) or '0'), now_us)
        local allowance = math.max(d.tau_us - (cost - 1) * d.interval_us, 0)
        if tat - now_us > allowance then
          return nil, b, (tat - allowance) / 1000
        end
      end
      local slots = math.min(cost, d.limit)
      if d.limit > 0 then
        local hk = constraint_held_key(K, b)
        redis.call('ZREMRANGEBYSCORE', hk, '-inf', ms)
        local used = redis.call('ZCARD', hk)
        if used >= d.limit or (used > 0 and used + slots > d.limit) then
          return nil, b, tonumber(redis.call('ZRANGE', hk, 0, 0, 'WITHSCORES')[2])
        end
      end
      plan[#plan + 1] = {b, cid, d.interval_us * cost, tat, slots, global}
    end
  end
  return plan
end
