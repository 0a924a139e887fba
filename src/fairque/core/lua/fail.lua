#!lua flags=allow-oom
--[[
fail: record a failed attempt of a leased task; retry it with backoff or fail it.

ARGV[1] id
ARGV[2] token
ARGV[3] error       error text kept on the task
ARGV[4] retry       0 | 1
ARGV[5] base_ms     backoff base: attempt n waits base * 2^(n-1)
ARGV[6] failed_ttl_ms
ARGV[7] delay_ms    explicit retry delay, or -1 for the backoff
ARGV[8] max_retries retry budget for this decision, or -1 for the task's own
ARGV[9] traceback   the failure's traceback ('' none)
ARGV[10] reason     the failure's kind, e.g. 'timeout' ('' none)
ARGV[11] details    the failure's data, serialized ('' none)
ARGV[12] run_us     the handler's run as the worker measured it ('': not reported)

Reply: 'SCHEDULED' (will retry) or 'FAILED'; a resend of a call that succeeded
       returns the same answer and changes nothing.
Errors: 'FQERR -1' (LeaseLost) when the token does not hold the lease.
]]
-- @include now
-- @include lease_fence
-- @include fail_attempt
-- @include replayed
-- @include last_op

local K = {prefix = KEYS[1], ring = KEYS[2], delayed = KEYS[3], leases = KEYS[4],
  deferred = KEYS[5], failed = KEYS[6], canceled = KEYS[7], meta = KEYS[8], stats = KEYS[9],
  caps = KEYS[10], capped = KEYS[11], wake = KEYS[12], ends = KEYS[13],
  constraint_due = KEYS[14], backlog = KEYS[15]}
local id = ARGV[1]
local req = 'L' .. ARGV[2]
local held, f = lease_fence(K, id, ARGV[2], 'op')
if not held then
  local again = replayed(last_op(K, id, f[1], f[3]), req)
  if again == 'SCHEDULED' or again == 'FAILED' then return again end
  redis.call('HINCRBY', K.stats, 'lease_lost', 1)
  return redis.error_reply('FQERR -1 lease lost for task ' .. id)
end
local ms, us = now()
local extra = {}
for i, field in ipairs({'traceback', 'reason', 'details'}) do
  if ARGV[8 + i] ~= '' then
    extra[#extra + 1] = field
    extra[#extra + 1] = ARGV[8 + i]
  end
end
return fail_attempt(K, id, ARGV[3], ARGV[4] == '1', ms, tonumber(ARGV[5]),
  tonumber(ARGV[6]), tonumber(ARGV[7]), req, tonumber(ARGV[8]), extra, us, ARGV[12])
