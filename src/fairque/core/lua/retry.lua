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
-- @include signal_wake
-- @include replayed
-- @include last_op
-- @include requeue_ended

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
requeue_ended(K, id, f[2], f[3], f[5], req, ARGV[2], tonumber(ARGV[3]), ms, us)
signal_wake(K, 1)
return 'QUEUED'
