#!lua flags=allow-oom
--[[
stats: a consistent snapshot of one queue. Places the intake's first tasks and trims
expired entries from the terminal registries first, so users' ready counts include
tasks just pushed and counts never include tasks whose data has expired.

ARGV[1] user_limit  report at most this many users from each of: the ring's head, the
                    capped users, the holders of the soonest-expiring leases
ARGV[2] ordering    'aging' | 'strict' (placing the intake)
ARGV[3] horizon_us

Reply: {counts[7] (SCHEDULED, DEFERRED, QUEUED, STARTED, FINISHED, FAILED, CANCELED),
        counters (flat hash), users (flat list: user, ready, in flight, weight, cap with
        0 = none), ring size, capped size, fairness mode (meta 'fair', '' when unset)}
]]
-- @include now
-- @include keys
-- @include intake_head
-- @include place_intake

local K = {prefix = KEYS[1], ring = KEYS[2], delayed = KEYS[3], leases = KEYS[4],
  queued = KEYS[5], deferred = KEYS[6], finished = KEYS[7], failed = KEYS[8], canceled = KEYS[9],
  stats = KEYS[10], capped = KEYS[11], weights = KEYS[12], caps = KEYS[13], meta = KEYS[14],
  intake = KEYS[15]}
local limit = tonumber(ARGV[1])
local ms = now()
local entries = intake_head(K)
if #entries > 0 then place_intake(K, ARGV[2], tonumber(ARGV[3]), entries) end
for _, registry in ipairs({K.finished, K.failed, K.canceled}) do
  redis.call('ZREMRANGEBYSCORE', registry, '-inf', ms)
end
local counts = {}
for _, registry in ipairs({K.delayed, K.deferred, K.queued, K.leases, K.finished, K.failed,
                           K.canceled}) do
  counts[#counts + 1] = redis.call('ZCARD', registry)
end
counts[3] = counts[3] + redis.call('LLEN', K.intake)  -- QUEUED, not placed yet
-- users worth showing, bounded: in-flight work is counted from unexpired leases
local order, seen = {}, {}
local function add(u)
  if u and not seen[u] then seen[u] = true; order[#order + 1] = u end
end
for _, u in ipairs(redis.call('ZRANGE', K.ring, 0, limit - 1)) do add(u) end
for _, u in ipairs(redis.call('SRANDMEMBER', K.capped, limit)) do add(u) end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', K.leases, '(' .. ms, '+inf', 'LIMIT', 0, limit)) do
  add(redis.call('HGET', task_key(K, id), 'user'))
end
local users = {}
for _, u in ipairs(order) do
  users[#users + 1] = u
  users[#users + 1] = redis.call('LLEN', critical_key(K, u))
    + redis.call('ZCARD', normal_key(K, u))
  users[#users + 1] = redis.call('ZCOUNT', held_key(K, u), '(' .. ms, '+inf')
  users[#users + 1] = tonumber(redis.call('HGET', K.weights, u) or '1')
  users[#users + 1] = tonumber(redis.call('HGET', K.caps, u) or '0')
end
return {counts, redis.call('HGETALL', K.stats), users, redis.call('ZCARD', K.ring),
  redis.call('SCARD', K.capped), redis.call('HGET', K.meta, 'fair') or ''}
