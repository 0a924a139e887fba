--[[
fail: record a failed attempt of a leased task; retry it with backoff or fail it.

KEYS[1] prefix      fq:{<queue>}:
KEYS[2] leases      STARTED registry
KEYS[3] delayed     SCHEDULED registry
KEYS[4] failed      FAILED registry (scored by expiry)
KEYS[5] stats
KEYS[6] capped      users held out of the ring by their in-flight cap
KEYS[7] wake        wake-up list (a scheduled retry shortens idle waits)

ARGV[1] id
ARGV[2] token
ARGV[3] error       error text kept on the task
ARGV[4] retry       0 | 1
ARGV[5] base_ms     backoff base: attempt n waits base * 2^(n-1)
ARGV[6] failed_ttl_ms
ARGV[7] delay_ms    explicit retry delay, or -1 for the backoff
ARGV[8] max_retries retry budget for this decision, or -1 for the task's own

Reply: 'SCHEDULED' (will retry) or 'FAILED'; a resend of a call that succeeded
       returns the same answer and changes nothing.
Errors: 'FQERR -1' (LeaseLost) when the token does not hold the lease.
]]
-- @include now
-- @include fail_attempt
-- @include replayed
-- @include last_op

local prefix, id = KEYS[1], ARGV[1]
local req = 'L' .. ARGV[2]
local f = redis.call('HMGET', prefix .. 'task:' .. id, 'state', 'lease', 'op')
if f[1] ~= 'STARTED' or f[2] ~= ARGV[2] then
  local again = replayed(last_op(prefix, id, f[1], f[3]), req)
  if again == 'SCHEDULED' or again == 'FAILED' then return again end
  return redis.error_reply('FQERR -1 lease lost for task ' .. id)
end
local ms = now()
return fail_attempt(prefix, id, ARGV[3], ARGV[4] == '1', ms, tonumber(ARGV[5]),
  tonumber(ARGV[6]), tonumber(ARGV[7]), req, tonumber(ARGV[8]))
