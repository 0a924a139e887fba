#!lua flags=allow-oom
--[[
purge: delete a queue's tasks and state, at most `limit` tasks per call so a huge
queue never blocks the server for long; call again until it reports 0 remaining.
The last call also removes the ring, counters, user lanes and limits, and what the
constraints' buckets hold of the deleted tasks (their leases and parked tasks; the rate
windows stay). Registered workers and the constraints themselves are kept.

ARGV[1] limit       tasks to delete in this call

Reply: {tasks deleted by this call, tasks remaining}.
]]
-- @include keys
-- @include aside_bucket

local K = {prefix = KEYS[1], ring = KEYS[2], delayed = KEYS[3], leases = KEYS[4],
  queued = KEYS[5], deferred = KEYS[6], finished = KEYS[7], failed = KEYS[8], canceled = KEYS[9],
  meta = KEYS[10], stats = KEYS[11], weights = KEYS[12], caps = KEYS[13], turns = KEYS[14],
  capped = KEYS[15], wake = KEYS[16], ends = KEYS[17], constraints = KEYS[18],
  constraint_due = KEYS[19], active = KEYS[20], intake = KEYS[21], backlog = KEYS[22],
  quotas = KEYS[23], aside = KEYS[24], groups = KEYS[25], group_weights = KEYS[26],
  shares = KEYS[27], group_shares = KEYS[28], group_caps = KEYS[29], dedup = KEYS[30]}
local registries = {K.delayed, K.deferred, K.queued, K.leases, K.finished, K.failed,
  K.canceled}
local budget = tonumber(ARGV[1])
local deleted = 0
-- tasks pushed one at a time and not placed yet: in no registry, only in the intake
while budget > 0 do
  local entries = redis.call('LRANGE', K.intake, 0, math.min(budget, 500) - 1)
  if #entries == 0 then break end
  for _, entry in ipairs(entries) do
    local id = string.match(entry, '^%d+\n%d\n[^\n]*\n[^\n]*\n(.*)$')
    redis.call('DEL', task_key(K, id), watch_key(K, id), done_key(K, id), gone_key(K, id))
  end
  redis.call('LTRIM', K.intake, #entries, -1)
  budget = budget - #entries
  deleted = deleted + #entries
end
for _, registry in ipairs(registries) do
  while budget > 0 do
    local ids = redis.call('ZRANGE', registry, 0, math.min(budget, 500) - 1)
    if #ids == 0 then break end
    for _, id in ipairs(ids) do
      local tk = task_key(K, id)
      local owner = redis.call('HMGET', tk, 'user', 'name')
      if owner[1] then
        redis.call('DEL', critical_key(K, owner[1]), normal_key(K, owner[1]),
          held_key(K, owner[1]), user_index_key(K, owner[1]), name_index_key(K, owner[2]),
          kept_key(K, owner[1]))
      end
      redis.call('DEL', tk, deps_waiting_key(K, id), deps_blocked_key(K, id), watch_key(K, id),
        done_key(K, id), gone_key(K, id))
    end
    redis.call('ZREM', registry, unpack(ids))
    budget = budget - #ids
    deleted = deleted + #ids
  end
end
-- tasks whose data expired before maintain unindexed them
while budget > 0 do
  local entries = redis.call('ZRANGE', K.ends, 0, math.min(budget, 500) - 1)
  if #entries == 0 then break end
  for _, entry in ipairs(entries) do
    local user, name = string.match(entry, '^([^\n]*)\n([^\n]*)\n')
    if user then
      redis.call('DEL', user_index_key(K, user), name_index_key(K, name), kept_key(K, user))
    end
  end
  redis.call('ZREM', K.ends, unpack(entries))
  budget = budget - #entries
end
local remaining = redis.call('ZCARD', K.ends) + redis.call('LLEN', K.intake)
for _, registry in ipairs(registries) do
  remaining = remaining + redis.call('ZCARD', registry)
end
if remaining == 0 then
  for _, u in ipairs(redis.call('ZRANGE', K.ring, 0, -1)) do
    redis.call('DEL', critical_key(K, u), normal_key(K, u))
  end
  for _, u in ipairs(redis.call('SMEMBERS', K.capped)) do
    redis.call('DEL', critical_key(K, u), normal_key(K, u))
  end
  for _, u in ipairs(redis.call('ZRANGE', K.active, 0, -1)) do
    redis.call('DEL', tenant_key(K, u))
  end
  -- groups: the members' mirrors (tenant hashes) and each group's hash
  local shared = redis.call('HGETALL', K.shares)
  for i = 1, #shared, 2 do redis.call('DEL', tenant_key(K, shared[i])) end
  local members = redis.call('HGETALL', K.groups)
  for i = 1, #members, 2 do
    redis.call('DEL', tenant_key(K, members[i]), group_key(K, members[i + 1]))
  end
  for _, limits in ipairs({K.group_weights, K.group_shares, K.group_caps}) do
    local set = redis.call('HGETALL', limits)
    for i = 1, #set, 2 do
      redis.call('DEL', group_key(K, set[i]), group_held_key(K, set[i]),
        group_capped_key(K, set[i]))
    end
  end
  redis.call('DEL', K.ring, K.capped, K.meta, K.stats, K.turns, K.weights, K.caps, K.wake,
    K.active, K.backlog, K.quotas, K.groups, K.group_weights, K.shares,
    K.group_shares, K.group_caps, K.dedup)
  -- a deleted task's lease would hold its buckets' slots until it expired (HGETALL:
  -- the commands the documented ACL rule allows)
  local defined = redis.call('HGETALL', K.constraints)
  for i = 1, #defined, 2 do
    for _, b in ipairs(redis.call('SMEMBERS', constraint_buckets_key(K, defined[i]))) do
      redis.call('DEL', constraint_held_key(K, b), constraint_parked_key(K, b),
        constraint_order_key(K, b))
    end
  end
  redis.call('DEL', K.constraint_due)
  -- the tasks set aside for want of a worker that handles their names
  for _, name in ipairs(redis.call('SMEMBERS', K.aside)) do
    local uk = aside_users_key(K, name)
    for _, u in ipairs(redis.call('SMEMBERS', uk)) do
      redis.call('DEL', constraint_parked_key(K, aside_bucket(u, name)))
    end
    redis.call('DEL', uk)
  end
  redis.call('DEL', K.aside)
end
return {deleted, remaining}
