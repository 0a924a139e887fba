#!lua flags=allow-oom
--[[
requeue: give a leased task back without counting a failed attempt.

ARGV[1] id
ARGV[2] token
ARGV[3] delay_ms    0: ready again now; > 0: SCHEDULED after the delay
ARGV[4] ordering    'aging' | 'strict'
ARGV[5] horizon_us
ARGV[6] run_us      the handler's run as the worker measured it ('': not reported; a
                    task given back before it ran reports 0 and is charged no run)

Reply: 'QUEUED' or 'SCHEDULED'; a resend of a call that succeeded returns the same
       answer and changes nothing.
Errors: 'FQERR -1' (LeaseLost) when the token does not hold the lease.
]]
-- @include now
-- @include keys
-- @include task_stock
-- @include lease_fence
-- @include mono_us
-- @include end_attempt
-- @include enqueue_ready
-- @include signal_wake
-- @include replayed
-- @include backlog_add
-- @include due_by

local K = {prefix = KEYS[1], ring = KEYS[2], delayed = KEYS[3], leases = KEYS[4],
  queued = KEYS[5], meta = KEYS[6], stats = KEYS[7], caps = KEYS[8], capped = KEYS[9],
  wake = KEYS[10], constraint_due = KEYS[11], backlog = KEYS[12]}
local id = ARGV[1]
local req = 'R' .. ARGV[2]
local held, f = lease_fence(K, id, ARGV[2], 'user', 'prio', 'op', 'started', 'fair')
if not held then
  local again = replayed(f[5], req)
  if again then return again end
  return redis.error_reply('FQERR -1 lease lost for task ' .. id)
end
local ms, us = now()
end_attempt(K, id, f[3], ms, nil, nil, nil, {ms - (f[6] or ms), f[7], nil, us, ARGV[6]})
redis.call('HINCRBY', K.stats, 'requeued', 1)
backlog_add(K, f[3], 1)
signal_wake(K, 1)
local tk = task_key(K, id)
local delay_ms = tonumber(ARGV[3])
if delay_ms > 0 then
  local due = ms + delay_ms
  redis.call('HSET', tk, 'state', 'SCHEDULED', 'run_at', due, 'op', req .. ' SCHEDULED')
  redis.call('ZADD', K.delayed, due, id)
  due_by(K, due)
  return 'SCHEDULED'
end
redis.call('HSET', tk, 'op', req .. ' QUEUED')
local prio = tonumber(f[4] or task_stock())
enqueue_ready(K, id, f[3], prio, mono_us(K, us), ms, ARGV[4], tonumber(ARGV[5]))
return 'QUEUED'
