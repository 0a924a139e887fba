--[[
extend: push a held lease's deadline to now + ms (worker heartbeat).

KEYS[1] prefix      fq:{<queue>}:
KEYS[2] leases      STARTED registry

ARGV[1] id
ARGV[2] token
ARGV[3] ms          new lease length from now

Reply: the new deadline (ms since the epoch, server time). A resend moves it again,
       to now + ms: the same answer as a second heartbeat.
Errors: 'FQERR -1' (LeaseLost) when the token does not hold the lease, or its
        deadline has passed (an expired lease no longer counts in flight, so the
        user's cap may have let another task start: it cannot be revived).
]]
-- @include now

local prefix, id = KEYS[1], ARGV[1]
local tk = prefix .. 'task:' .. id
local f = redis.call('HMGET', tk, 'state', 'lease', 'user', 'deadline')
local ms = now()
if f[1] ~= 'STARTED' or f[2] ~= ARGV[2] or tonumber(f[4]) <= ms then
  return redis.error_reply('FQERR -1 lease lost for task ' .. id)
end
local deadline = ms + tonumber(ARGV[3])
redis.call('HSET', tk, 'deadline', deadline)
redis.call('ZADD', KEYS[2], deadline, id)
redis.call('ZADD', prefix .. 'held:' .. f[3], deadline, id)
return deadline
