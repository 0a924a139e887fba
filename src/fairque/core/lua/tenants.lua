#!lua flags=allow-oom
--[[
tenants: what the users of a queue were served, for the most recently leased `limit`
users, and the queue's totals (the rest is their difference): leases, outcomes, worker
time and the wait histogram each user's tenant hash keeps (includes/fair_settle,
includes/lease_tasks). Reads only.

ARGV[1] limit    users to report (the most recently leased first)

Reply: {fairness mode ('' when unset), users known (ZCARD active), the stats hash
        (flat), then per user: user, weight, last lease (ms), its tenant hash (flat),
        its backlog now}
]]
-- @include keys

local K = {prefix = KEYS[1], active = KEYS[2], weights = KEYS[3], stats = KEYS[4],
  meta = KEYS[5], backlog = KEYS[6]}
local out = {redis.call('HGET', K.meta, 'fair') or '', redis.call('ZCARD', K.active),
  redis.call('HGETALL', K.stats)}
local users = redis.call('ZREVRANGE', K.active, 0, tonumber(ARGV[1]) - 1, 'WITHSCORES')
for i = 1, #users, 2 do
  local user = users[i]
  out[#out + 1] = user
  out[#out + 1] = tonumber(redis.call('HGET', K.weights, user) or '1')
  out[#out + 1] = users[i + 1]
  out[#out + 1] = redis.call('HGETALL', tenant_key(K, user))
  out[#out + 1] = tonumber(redis.call('HGET', K.backlog, user) or '0')
end
return out
