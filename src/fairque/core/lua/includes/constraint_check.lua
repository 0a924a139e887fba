-- @include keys
-- constraint_check(K, cons, ms, now_us): may a task in the constraint buckets `cons` (the task
-- hash's JSON array) start now? Returns the plan for constraint_take, or nil, the
-- first bucket at its limit and when (ms) that limit frees: a rate limit's next GCRA
-- slot (to the microsecond: a fraction of a ms), a concurrency limit's earliest lease
-- deadline (its use is counted from unexpired leases, pruned here). A bucket whose
-- constraint was removed limits nothing.
-- A rate is a GCRA: a start never comes before its slot, and a late start moves the
-- schedule to itself, so no window of W seconds holds more than floor(W / interval) +
-- burst starts. The rate is reached by workers that wait for the slot on their own
-- clock (the refusal says when it is), not by letting a late start pull the next one
-- early.
local function constraint_check(K, cons, ms, now_us)
  local plan = {}
  for _, b in ipairs(cjson.decode(cons)) do
    local cid = string.match(b, '^[^:]+')
    local raw = redis.call('HGET', K.constraints, cid)
    if raw then
      local d = cjson.decode(raw)
      local tat = 0
      if d.interval_us > 0 then
        tat = math.max(tonumber(redis.call('GET', constraint_rate_key(K, b)) or '0'), now_us)
        if tat - now_us > d.tau_us then
          return nil, b, (tat - d.tau_us) / 1000
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
