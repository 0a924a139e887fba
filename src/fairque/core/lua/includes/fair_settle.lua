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
-- `ran` (handler_ms). Returns the attempt's run in us (the process that ended it counts
-- it in its metrics; a script that ends one on its own counts it: count_attempt).
-- When the lease was charged, moves the tag to what the run took over the weight, and,
-- for a run that ended by
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
  local busy = math.floor(ran * 1000 + 0.5)
  if not charged then return busy end
  fair_charge(K, user, math.floor(math.max(busy, FAIR_MIN) / w + 0.5) - charged)
  if outcome and us ~= false then
    est = tonumber(est)
    local moved
    if not est then
      moved = ran
    elseif math.abs(ran - est) > est / 4 then
      moved = est * (1 - FAIR_ALPHA) + ran * FAIR_ALPHA
    end
    if moved then redis.call('HSET', tenant_key(K, user), 'est', moved) end
  end
  return busy
end
