--[[
requeue: give a leased task back without counting a failed attempt.

KEYS[1] prefix      fq:{<queue>}:
KEYS[2] leases      STARTED registry
KEYS[3] delayed     SCHEDULED registry
KEYS[4] queued      QUEUED registry
KEYS[5] ring
KEYS[6] meta
KEYS[7] stats
KEYS[8] capped      users held out of the ring by their in-flight cap
KEYS[9] wake        wake-up list

ARGV[1] id
ARGV[2] token
ARGV[3] delay_ms    0: ready again now; > 0: SCHEDULED after the delay
ARGV[4] ordering    'aging' | 'strict'
ARGV[5] horizon_us

Reply: 'QUEUED' or 'SCHEDULED'; a resend of a call that succeeded returns the same
       answer and changes nothing.
Errors: 'FQERR -1' (LeaseLost) when the token does not hold the lease.
]]
-- @include now
-- @include mono_us
-- @include end_attempt
-- @include enqueue_ready
-- @include signal_wake
-- @include replayed

local prefix, id = KEYS[1], ARGV[1]
local req = 'R' .. ARGV[2]
local tk = prefix .. 'task:' .. id
local f = redis.call('HMGET', tk, 'state', 'lease', 'user', 'prio', 'op')
if f[1] ~= 'STARTED' or f[2] ~= ARGV[2] then
  local again = replayed(f[5], req)
  if again then return again end
  return redis.error_reply('FQERR -1 lease lost for task ' .. id)
end
local ms, us = now()
end_attempt(prefix, id, f[3], ms)
redis.call('HINCRBY', prefix .. 'stats', 'requeued', 1)
signal_wake(prefix, 1)
local delay_ms = tonumber(ARGV[3])
if delay_ms > 0 then
  local due = ms + delay_ms
  redis.call('HSET', tk, 'state', 'SCHEDULED', 'run_at', due, 'op', req .. ' SCHEDULED')
  redis.call('ZADD', KEYS[3], due, id)
  return 'SCHEDULED'
end
redis.call('HSET', tk, 'op', req .. ' QUEUED')
enqueue_ready(prefix, id, f[3], tonumber(f[4]), mono_us(prefix, us), ms, ARGV[4], tonumber(ARGV[5]))
return 'QUEUED'
