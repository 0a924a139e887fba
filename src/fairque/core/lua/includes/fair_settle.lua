-- @include keys
-- @include fair_charge
-- @include now
-- fair_settle(K, user, run): an attempt of `user`'s ended; `run` = {ran, charged, fw,
-- est, outcome, fstart, us}: `ran` its lease's span in ms (start to end, or to the
-- deadline of a reclaimed lease), then the task's time-mode fields as read (strings, or
-- false when the lease was not charged), `outcome` 'done' or 'failed' (nil: a give-back
-- or a cancel), `fstart` the lease's start in us (nil for a reclaimed lease: its span is
-- exact), `us` now in us (nil: read here). Counts the attempt for the user (worker
-- time 'busy_us', the outcome) and the queue ('busy_us', 'failed_attempts'); when the
-- lease was charged, moves the tag to what the lease held over the weight, and, for a
-- run that ended by itself, moves the user's estimate towards it, only when the run was
-- more than a quarter off it (the corrections keep the tags exact: the estimate only has
-- to be close).
local function fair_settle(K, user, run)
  local ran, charged, outcome, fstart = run[1], run[2], run[5], run[6]
  if charged and fstart then
    local us = run[7] or select(2, now())
    ran = (us - fstart) / 1000
  end
  if ran < 0 then ran = 0 end
  local tk = tenant_key(K, user)
  local busy = math.floor(ran * 1000 + 0.5)
  redis.call('HINCRBY', tk, 'busy_us', busy)
  redis.call('HINCRBY', K.stats, 'busy_us', busy)
  if outcome then
    redis.call('HINCRBY', tk, outcome, 1)
    if outcome == 'failed' then redis.call('HINCRBY', K.stats, 'failed_attempts', 1) end
  end
  if not charged then return end
  local held = math.max(busy, FAIR_MIN)
  fair_charge(K, user, math.floor(held / (tonumber(run[3]) or 1) + 0.5) - charged)
  if outcome and fstart then
    local est = tonumber(run[4])
    if not est then
      redis.call('HSET', tk, 'est', ran)
    elseif math.abs(ran - est) > est / 4 then
      redis.call('HSET', tk, 'est', est * (1 - FAIR_ALPHA) + ran * FAIR_ALPHA)
    end
  end
end
