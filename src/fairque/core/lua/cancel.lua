#!lua flags=allow-oom
--[[
cancel: cancel a task that has not ended. A leased task loses its lease, so its
worker's complete() returns False; the lease's token is kept in 'cut_lease', so
the worker's next extend() learns that the task was canceled (CancelRequested),
and '<id> <token>' goes on the worker's stop list (kept a minute, its last
STOPS_KEPT entries), which the worker blocks on: it stops the handler at once. A
DEFERRED task leaves its upstreams' blocked sets; dependents of the canceled task
are canceled too (unless they wait).

ARGV[1] id
ARGV[2] ttl_ms      how long the canceled task stays readable
ARGV[3] req         request id (unique per call; the same when a call is resent)

Reply: 1 canceled (also for a resend of a call that canceled it); 0 the task had
       already ended (FINISHED, FAILED or CANCELED).
Errors: 'FQERR -2' (TaskNotFound) when no such task exists.
]]
-- @include now
-- @include keys
-- @include task_stock
-- @include has_ready
-- @include leave_ring
-- @include end_attempt
-- @include count_attempt
-- @include finalize
-- @include detach_waiting
-- @include cascade_failure
-- @include replayed
-- @include last_op
-- @include backlog_add

local K = {prefix = KEYS[1], ring = KEYS[2], delayed = KEYS[3], leases = KEYS[4],
  queued = KEYS[5], deferred = KEYS[6], canceled = KEYS[7], meta = KEYS[8], stats = KEYS[9],
  caps = KEYS[10], turns = KEYS[11], capped = KEYS[12], wake = KEYS[13], ends = KEYS[14],
  constraint_due = KEYS[15], active = KEYS[16], intake = KEYS[17], backlog = KEYS[18]}
local id, req = ARGV[1], ARGV[3]
local STOPS_KEPT = 1000
local f = redis.call('HMGET', task_key(K, id), 'state', 'user', 'prio', 'op', 'lease', 'parked',
  'started', 'fair', 'created', 'name', 'worker')
local state, user, prio = f[1], f[2], f[3] or task_stock()
if replayed(last_op(K, id, state, f[4]), req) then return 1 end
if not state then return redis.error_reply('FQERR -2 no task ' .. id) end
if state == 'FINISHED' or state == 'FAILED' or state == 'CANCELED' then return 0 end
local ms, us = now()
if state == 'QUEUED' then
  local placed
  if tonumber(prio) >= 6 then
    placed = redis.call('LREM', critical_key(K, user), 1, id)
  else
    placed = redis.call('ZREM', normal_key(K, user), id)
  end
  if placed == 0 and not f[6] then
    -- pushed one at a time and not yet placed: its entry goes, its indexes come (a
    -- canceled task is listed)
    redis.call('LREM', K.intake, -1,
      f[9] .. '\n' .. prio .. '\n' .. user .. '\n' .. f[10] .. '\n' .. id)
    redis.call('ZADD', user_index_key(K, user), f[9], id)
    redis.call('ZADD', name_index_key(K, f[10]), f[9], id)
  end
  redis.call('ZREM', K.queued, id)
  if f[6] then redis.call('ZREM', constraint_parked_key(K, f[6]), id) end
  if not has_ready(K, user) then leave_ring(K, user) end
elseif state == 'SCHEDULED' then
  redis.call('ZREM', K.delayed, id)
elseif state == 'DEFERRED' then
  redis.call('ZREM', K.deferred, id)
  detach_waiting(K, id)
elseif state == 'STARTED' then
  redis.call('HSET', task_key(K, id), 'cut_lease', f[5])
  if f[11] and f[11] ~= '' then
    local stops = stops_key(K, f[11])
    redis.call('RPUSH', stops, id .. ' ' .. f[5])
    redis.call('LTRIM', stops, -STOPS_KEPT, -1)
    redis.call('PEXPIRE', stops, 60000)
  end
  count_attempt(K, user, end_attempt(K, id, user, ms, nil, nil, nil,
    {ms - (f[7] or ms), f[8], nil, us}), nil)
end
if state ~= 'STARTED' then backlog_add(K, user, -1) end
finalize(K, id, 'CANCELED', K.canceled, ms, tonumber(ARGV[2]), 'canceled', req .. ' 1')
cascade_failure(K, id, ms, tonumber(ARGV[2]))
return 1
