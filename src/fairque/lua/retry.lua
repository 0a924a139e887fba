--[[
retry: put a FAILED or CANCELED task back in its user's lane with a fresh retry
budget (an operator's "try again"). Dependents still waiting for it (policy 'wait')
are released when it finishes.

KEYS[1] prefix      fq:{<queue>}:
KEYS[2] failed      FAILED registry
KEYS[3] canceled    CANCELED registry
KEYS[4] queued      QUEUED registry
KEYS[5] ring
KEYS[6] meta
KEYS[7] wake

ARGV[1] id
ARGV[2] ordering    'aging' | 'strict'
ARGV[3] horizon_us
ARGV[4] req         request id (unique per call; the same when a call is resent)

Reply: 'QUEUED' (also for a resend of a call that re-queued it).
Errors: 'FQERR -2' (TaskNotFound) no such task; 'FQERR -4' (InvalidTransition) the
task is not FAILED or CANCELED.
]]
-- @include now
-- @include mono_us
-- @include enqueue_ready
-- @include signal_wake
-- @include replayed
-- @include last_op

local prefix, id, req = KEYS[1], ARGV[1], ARGV[4]
local tk = prefix .. 'task:' .. id
local f = redis.call('HMGET', tk, 'state', 'user', 'prio', 'op')
if replayed(last_op(prefix, id, f[1], f[4]), req) then return 'QUEUED' end
if not f[1] then return redis.error_reply('FQERR -2 no task ' .. id) end
if f[1] ~= 'FAILED' and f[1] ~= 'CANCELED' then
  return redis.error_reply('FQERR -4 task ' .. id .. ' is ' .. f[1] .. ', not FAILED or CANCELED')
end
local ms, us = now()
redis.call('ZREM', KEYS[2], id)
redis.call('ZREM', KEYS[3], id)
redis.call('PERSIST', tk)
redis.call('PERSIST', prefix .. 'deps:blocked:' .. id)
redis.call('HSET', tk, 'retries', 0, 'op', req .. ' QUEUED')
redis.call('HDEL', tk, 'error', 'ended', 'result', 'run_at')
enqueue_ready(prefix, id, f[2], tonumber(f[3]), mono_us(prefix, us), ms, ARGV[2], tonumber(ARGV[3]))
signal_wake(prefix, 1)
return 'QUEUED'
