-- @include keys
-- @include task_stock
-- @include mono_us
-- @include enqueue_ready
-- @include backlog_add
-- requeue_ended(K, id, user, prio, name, req, ordering, horizon_us, ms, us): put a FAILED
-- or CANCELED task (the caller checked) back in its user's lane with a fresh retry
-- budget, recording `req` as its last op (a resend answers as the first run). Dependents
-- still waiting for it (policy 'wait') are released when it finishes.
local function requeue_ended(K, id, user, prio, name, req, ordering, horizon_us, ms, us)
  local tk = task_key(K, id)
  redis.call('ZREM', K.failed, id)
  redis.call('ZREM', K.canceled, id)
  redis.call('ZREM', K.ends, user .. '\n' .. name .. '\n' .. id)  -- kept again: stays indexed
  redis.call('PERSIST', tk)
  redis.call('PERSIST', deps_blocked_key(K, id))
  redis.call('HSET', tk, 'op', req .. ' QUEUED')
  redis.call('HDEL', tk, 'retries', 'error', 'ended', 'result', 'run_at', 'traceback', 'reason',
    'details', 'consumed', 'cut_lease')
  enqueue_ready(K, id, user, tonumber(prio or task_stock()), mono_us(K, us), ms, ordering,
    horizon_us)
  backlog_add(K, user, 1)
  -- (its payload, kept while it had ended, stays counted against its byte quota)
  redis.call('HDEL', kept_key(K, user), id)
end
