--[[
stats: a consistent snapshot of one queue. Trims expired entries from the terminal
registries first, so counts never include tasks whose data has expired.

KEYS[1] prefix      fq:{<queue>}:
KEYS[2] delayed     SCHEDULED
KEYS[3] deferred    DEFERRED
KEYS[4] queued      QUEUED
KEYS[5] leases      STARTED
KEYS[6] finished    FINISHED
KEYS[7] failed      FAILED
KEYS[8] canceled    CANCELED
KEYS[9] stats       counters
KEYS[10] inflight
KEYS[11] ring
KEYS[12] capped

ARGV[1] user_limit  report ready counts for at most this many ring users

Reply: {counts[7] (registry order above), counters (flat hash), inflight (flat hash),
        users (flat list user, ready), ring size, capped size}
]]
-- @include now

local prefix = KEYS[1]
local ms = now()
local counts = {}
for i = 2, 8 do
  if i >= 6 then redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', ms) end
  counts[#counts + 1] = redis.call('ZCARD', KEYS[i])
end
local users = {}
for _, u in ipairs(redis.call('ZRANGE', KEYS[11], 0, tonumber(ARGV[1]) - 1)) do
  users[#users + 1] = u
  users[#users + 1] = redis.call('LLEN', prefix .. 'crit:' .. u)
    + redis.call('ZCARD', prefix .. 'norm:' .. u)
end
return {counts, redis.call('HGETALL', KEYS[9]), redis.call('HGETALL', KEYS[10]), users,
  redis.call('ZCARD', KEYS[11]), redis.call('SCARD', KEYS[12])}
