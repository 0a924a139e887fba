-- @include keys
-- @include task_stock
-- @include end_attempt
-- @include signal_wake
-- @include finalize
-- @include cascade_failure
-- @include count_attempt
-- @include backlog_add
-- @include due_by
-- fail_attempt(K, id, error, retry, ms, base_ms, failed_ttl_ms, delay_ms, req,
-- max_retries, extra, us, run_us): a STARTED attempt failed (`us`: now in
-- microseconds, or nil; `run_us`: the handler's run as the worker measured it, or
-- nil). `extra` (or nil) holds the failure's further fields as flat pairs ('traceback',
-- 'reason', 'details'); they replace the previous attempt's. With retry and retries left (the task's own
-- budget, or `max_retries` when >= 0), schedule the next attempt after delay_ms (or
-- base * 2^(n-1) when delay_ms < 0, at most 10 years) and return 'SCHEDULED';
-- otherwise the task is FAILED, keeping the error, and 'FAILED' is returned. `req`
-- (or nil for a reclaimed lease) records the answer for a resent request (see replayed).
-- A reclaimed lease's attempt (no `req`: it ran until its lease expired) is counted
-- here (count_attempt); a failure a process reports is counted by that process.
local function fail_attempt(K, id, err, retry, ms, base_ms, failed_ttl_ms, delay_ms, req,
                            max_retries, extra, us, run_us)
  local tk = task_key(K, id)
  local f = redis.call('HMGET', tk, 'user', 'retries', 'max_retries', 'started', 'cons',
    'deadline', 'fair', 'cost', 'gheld')
  if not f[1] then
    redis.call('ZREM', K.leases, id)
    return 'MISSING'
  end
  -- a reclaimed lease (no `req`) held its worker's slot until its deadline
  local ran = (req and ms or tonumber(f[6] or ms)) - tonumber(f[4] or ms)
  local busy = end_attempt(K, id, f[1], ms, f[5], f[8], f[9],
    {ran, f[7], 'failed', req and us or false, run_us}, 'traceback', 'reason', 'details')
  if extra and #extra > 0 then redis.call('HSET', tk, unpack(extra)) end
  if not req then count_attempt(K, f[1], busy, 'failed') end
  local n = tonumber(f[2] or 0)
  local limit = tonumber(f[3] or select(2, task_stock()))
  if max_retries and max_retries >= 0 then limit = max_retries end
  if retry and n < limit then
    n = n + 1
    if delay_ms < 0 then delay_ms = math.min(base_ms * 2 ^ (n - 1), 315360000000) end
    local due = ms + math.floor(delay_ms)
    if req then
      redis.call('HSET', tk, 'error', err, 'retries', n, 'state', 'SCHEDULED', 'run_at', due,
        'op', req .. ' SCHEDULED')
    else
      redis.call('HSET', tk, 'error', err, 'retries', n, 'state', 'SCHEDULED', 'run_at', due)
    end
    redis.call('ZADD', K.delayed, due, id)
    due_by(K, due)
    backlog_add(K, f[1], 1)
    redis.call('HINCRBY', K.stats, 'retried', 1)
    signal_wake(K, 1)
    return 'SCHEDULED'
  end
  redis.call('HSET', tk, 'error', err)
  finalize(K, id, 'FAILED', K.failed, ms, failed_ttl_ms, 'failed', req and req .. ' FAILED')
  cascade_failure(K, id, ms, failed_ttl_ms)
  return 'FAILED'
end
