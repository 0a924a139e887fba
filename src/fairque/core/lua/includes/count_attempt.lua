-- @include keys
-- count_attempt(K, user, busy, outcome): count an attempt that a script ended on its own
-- (a reclaimed lease, a cancel), which no process measured: its run `busy` (us) as
-- worker time of the queue and of `user` ('busy_us'), and its `outcome` ('failed', or
-- nil for none) for the user, a failed one for the queue too ('failed_attempts'). The
-- attempts a process ends are counted by that process (fairque.core.tally).
local function count_attempt(K, user, busy, outcome)
  local tk = tenant_key(K, user)
  redis.call('HINCRBY', tk, 'busy_us', busy)
  redis.call('HINCRBY', K.stats, 'busy_us', busy)
  if outcome then
    redis.call('HINCRBY', tk, outcome, 1)
    if outcome == 'failed' then redis.call('HINCRBY', K.stats, 'failed_attempts', 1) end
  end
end
