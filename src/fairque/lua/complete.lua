--[[
complete: finish a leased task, fenced by its lease token, and release the
dependents that were waiting only for it.

KEYS[1] prefix      fq:{<queue>}:
KEYS[2] leases      STARTED registry
KEYS[3] finished    FINISHED registry (scored by expiry)
KEYS[4] stats
KEYS[5] inflight
KEYS[6] wake        wake-up list (signalled when dependents become ready)

ARGV[1] id
ARGV[2] token       lease token given by pop
ARGV[3] has_result  0 | 1
ARGV[4] result      serialized result (ignored unless has_result and keep_result)
ARGV[5] ordering    'aging' | 'strict' (for released dependents)
ARGV[6] horizon_us

Reply: 1 when this call finished the task; 0 when the lease was lost (expired,
reclaimed, canceled or finished by someone else); nothing changes then.
]]
-- @include now
-- @include end_attempt
-- @include finalize
-- @include release_dependents

local prefix, id = KEYS[1], ARGV[1]
local tk = prefix .. 'task:' .. id
local f = redis.call('HMGET', tk, 'state', 'lease', 'user', 'keep_result', 'result_ttl')
if f[1] ~= 'STARTED' or f[2] ~= ARGV[2] then return 0 end
local ms, us = now()
end_attempt(prefix, id, f[3])
redis.call('HDEL', tk, 'error')
if ARGV[3] == '1' and f[4] == '1' then redis.call('HSET', tk, 'result', ARGV[4]) end
if redis.call('EXISTS', prefix .. 'deps:blocked:' .. id) == 1 then
  local ready = release_dependents(prefix, id, ms, us, ARGV[5], tonumber(ARGV[6]))
  if ready > 0 then
    redis.call('LPUSH', KEYS[6], '1')
    redis.call('LTRIM', KEYS[6], 0, 63)
  end
end
finalize(prefix, id, 'FINISHED', 'finished', ms, tonumber(f[5]), 'completed')
return 1
