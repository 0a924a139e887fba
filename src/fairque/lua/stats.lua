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
KEYS[10] ring
KEYS[11] capped

ARGV[1] user_limit  report at most this many users from each of: the ring's head, the
                    capped users, the holders of the soonest-expiring leases

Reply: {counts[7] (registry order above), counters (flat hash), users (flat list
        user, ready, in flight), ring size, capped size}
]]
-- @include now

local prefix = KEYS[1]
local limit = tonumber(ARGV[1])
local ms = now()
local counts = {}
for i = 2, 8 do
  if i >= 6 then redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', ms) end
  counts[#counts + 1] = redis.call('ZCARD', KEYS[i])
end
-- users worth showing, bounded: in-flight work is counted from unexpired leases
local order, seen = {}, {}
local function add(u)
  if u and not seen[u] then seen[u] = true; order[#order + 1] = u end
end
for _, u in ipairs(redis.call('ZRANGE', KEYS[10], 0, limit - 1)) do add(u) end
for _, u in ipairs(redis.call('SRANDMEMBER', KEYS[11], limit)) do add(u) end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[5], '(' .. ms, '+inf', 'LIMIT', 0, limit)) do
  add(redis.call('HGET', prefix .. 'task:' .. id, 'user'))
end
local users = {}
for _, u in ipairs(order) do
  users[#users + 1] = u
  users[#users + 1] = redis.call('LLEN', prefix .. 'crit:' .. u)
    + redis.call('ZCARD', prefix .. 'norm:' .. u)
  users[#users + 1] = redis.call('ZCOUNT', prefix .. 'held:' .. u, '(' .. ms, '+inf')
end
return {counts, redis.call('HGETALL', KEYS[9]), users, redis.call('ZCARD', KEYS[10]),
  redis.call('SCARD', KEYS[11])}
