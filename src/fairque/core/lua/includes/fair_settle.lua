-- @include keys
-- @include fair_charge
-- @include now
-- @include handler_ms
-- fair_settle(K, user, run): an attempt of `user`'s ended; `run` = {ran, fair, outcome,
-- us, reported}: `ran` its lease's span in ms (start to end, or to the deadline of a
-- reclaimed lease), `fair` the task's 'fair' field (false: the lease was not charged),
-- `outcome` 'done' or 'failed' (nil: a give-back or a cancel), `us` now in microseconds
-- (nil: read here; false: `ran` is exact, a reclaimed lease's span), `reported` the
-- handler's run as the worker measured it (us, a string; '' or nil: none), which lowers
-- `ran` (handler_ms). Counts the attempt for the user (worker time 'busy_us', the
-- outcome) and the queue ('busy_us', 'failed_attempts'); when the lease was charged,
-- moves the tag to what the run took over the weight, and, for a run that ended by
-- itself, moves the user's estimate towards it, only when the run was more than a
-- quarter off it (the corrections keep the tags exact: the estimate only has to be
-- close). A new user's first charge is the queue's mean attempt (fair_first_est).
local function fair_settle(K, user, run)
  local ran, fair, outcome, us = run[1], run[2], run[3], run[4]
  local charged, w, est, fstart
  if fair then
    charged, w, est, fstart = string.match(fair, '^(%d+) (%S+) (%S+) (%d+)$')
    if us ~= false then ran = ((us or select(2, now())) - fstart) / 1000 end
  end
  if ran < 0 then ran = 0 end
  ran = handler_ms(ran, run[5])
  local tk = tenant_key(K, user)
  local busy = math.floor(ran * 1000 + 0.5)
  redis.call('HINCRBY', tk, 'busy_us', busy)
  redis.call('HINCRBY', K.stats, 'busy_us', busy)
  if outcome then
    redis.call('HINCRBY', tk, outcome, 1)
    if outcome == 'failed' then redis.call('HINCRBY', K.stats, 'failed_attempts', 1) end
  end
  if not charged then return end
  fair_charge(K, user, math.floor(math.max(busy, FAIR_MIN) / w + 0.5) - charged)
  if outcome and us ~= false then
    est = tonumber(est)
    local moved
    if not est then
      moved = ran
    elseif math.abs(ran - est) > est / 4 then
      moved = est * (1 - FAIR_ALPHA) + ran * FAIR_ALPHA
    end
    if moved then redis.call('HSET', tk, 'est', moved) end
  end
end
