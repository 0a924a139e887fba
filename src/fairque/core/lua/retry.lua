#!lua flags=allow-oom
--[[
retry: put a FAILED or CANCELED task back in its user's lane with a fresh retry
budget (an operator's "try again"). Dependents still waiting for it (policy 'wait')
are released when it finishes.

ARGV[1] id
ARGV[2] ordering    'aging' | 'strict'
ARGV[3] horizon_us
ARGV[4] req         request id (unique per call; the same when a call is resent)

Reply: 'QUEUED' (also for a resend of a call that re-queued it).
Errors: 'FQERR -2' (TaskNotFound) no such task; 'FQERR -4' (InvalidTransition) the
task is not FAILED or CANCELED.
]]
-- @include now
-- @include keys
-- @include task_stock
-- @include mono_us
-- @include enqueue_ready
-- @include signal_wake
-- @include replayed
-- @include last_op
-- @include backlog_add

local K = {prefix = KEYS[1], ring = KEYS[2], queued = KEYS[3], failed = KEYS[4],
  canceled = KEYS[5], meta = KEYS[6], capped = KEYS[7], wake = KEYS[8], ends = KEYS[9],
  backlog = KEYS[10]}
local id, req = ARGV[1], ARGV[4]
local tk = task_key(K, id)
local f = redis.call('HMGET', tk, 'state', 'user', 'prio', 'op', 'name')
if replayed(last_op(K, id, f[1], f[4]), req) then return 'QUEUED' end
if not f[1] then return redis.error_reply('FQERR -2 no task ' .. id) end
if f[1] ~= 'FAILED' and f[1] ~= 'CANCELED' then
  return redis.error_reply('FQERR -4 task ' .. id .. ' is ' .. f[1] .. ', not FAILED or CANCELED')
end
local ms, us = now()
redis.call('ZREM', K.failed, id)
redis.call('ZREM', K.canceled, id)
redis.call('ZREM', K.ends, f[2] .. '\n' .. f[5] .. '\n' .. id)  -- kept again: stays indexed
redis.call('PERSIST', tk)
redis.call('PERSIST', deps_blocked_key(K, id))
redis.call('HSET', tk, 'op', req .. ' QUEUED')
redis.call('HDEL', tk, 'retries', 'error', 'ended', 'result', 'run_at', 'traceback', 'reason',
  'details', 'consumed', 'cut_lease')
local prio = tonumber(f[3] or task_stock())
enqueue_ready(K, id, f[2], prio, mono_us(K, us), ms, ARGV[2], tonumber(ARGV[3]))
backlog_add(K, f[2], 1)
signal_wake(K, 1)
return 'QUEUED'
