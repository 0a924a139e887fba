--[[
cancel: cancel a task that has not ended. A leased task loses its lease, so its
worker's complete() returns False. A DEFERRED task leaves its upstreams' blocked
sets; dependents of the canceled task are canceled too (unless they wait).

KEYS[1] prefix      fq:{<queue>}:
KEYS[2] ring
KEYS[3] queued      QUEUED registry
KEYS[4] delayed     SCHEDULED registry
KEYS[5] deferred    DEFERRED registry
KEYS[6] leases      STARTED registry
KEYS[7] canceled    CANCELED registry (scored by expiry)
KEYS[8] stats
KEYS[9] capped      users held out of the ring by their in-flight cap

ARGV[1] id
ARGV[2] ttl_ms      how long the canceled task stays readable
ARGV[3] req         request id (unique per call; the same when a call is resent)

Reply: 1 canceled (also for a resend of a call that canceled it); 0 the task had
       already ended (FINISHED, FAILED or CANCELED).
Errors: 'FQERR -2' (TaskNotFound) when no such task exists.
]]
-- @include now
-- @include has_ready
-- @include end_attempt
-- @include finalize
-- @include detach_waiting
-- @include cascade_failure
-- @include replayed
-- @include last_op

local prefix, id, req = KEYS[1], ARGV[1], ARGV[3]
local tk = prefix .. 'task:' .. id
local f = redis.call('HMGET', tk, 'state', 'user', 'prio', 'op')
local state, user = f[1], f[2]
if replayed(last_op(prefix, id, state, f[4]), req) then return 1 end
if not state then return redis.error_reply('FQERR -2 no task ' .. id) end
if state == 'FINISHED' or state == 'FAILED' or state == 'CANCELED' then return 0 end
local ms = now()
if state == 'QUEUED' then
  if tonumber(f[3]) >= 6 then
    redis.call('LREM', prefix .. 'crit:' .. user, 1, id)
  else
    redis.call('ZREM', prefix .. 'norm:' .. user, id)
  end
  redis.call('ZREM', KEYS[3], id)
  if not has_ready(prefix, user) then
    redis.call('ZREM', KEYS[2], user)
    redis.call('HDEL', prefix .. 'turns', user)
  end
elseif state == 'SCHEDULED' then
  redis.call('ZREM', KEYS[4], id)
elseif state == 'DEFERRED' then
  redis.call('ZREM', KEYS[5], id)
  detach_waiting(prefix, id)
elseif state == 'STARTED' then
  end_attempt(prefix, id, user, ms)
end
finalize(prefix, id, 'CANCELED', 'canceled', ms, tonumber(ARGV[2]), 'canceled', req .. ' 1')
cascade_failure(prefix, id, ms, tonumber(ARGV[2]))
return 1
