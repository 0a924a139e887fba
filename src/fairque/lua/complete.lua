--[[
complete: finish a leased task, fenced by its lease token.

KEYS[1] prefix      fq:{<queue>}:
KEYS[2] leases      STARTED registry
KEYS[3] finished    FINISHED registry (scored by expiry)
KEYS[4] stats
KEYS[5] inflight

ARGV[1] id
ARGV[2] token       lease token given by pop
ARGV[3] has_result  0 | 1
ARGV[4] result      serialized result (ignored unless has_result and keep_result)

Reply: 1 when this call finished the task; 0 when the lease was lost (expired,
reclaimed, canceled or finished by someone else); nothing changes then.
]]
-- @include now
-- @include end_attempt
-- @include finalize

local prefix, id = KEYS[1], ARGV[1]
local tk = prefix .. 'task:' .. id
local f = redis.call('HMGET', tk, 'state', 'lease', 'user', 'keep_result', 'result_ttl')
if f[1] ~= 'STARTED' or f[2] ~= ARGV[2] then return 0 end
local ms = now()
end_attempt(prefix, id, f[3])
redis.call('HDEL', tk, 'error')
if ARGV[3] == '1' and f[4] == '1' then redis.call('HSET', tk, 'result', ARGV[4]) end
finalize(prefix, id, 'FINISHED', 'finished', ms, tonumber(f[5]), 'completed')
return 1
