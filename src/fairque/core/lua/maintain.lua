#!lua flags=allow-oom
--[[
maintain: bounded housekeeping that keeps a queue from growing without an operator.
Removes up to `limit` expired ids from each terminal registry (their task data has
already expired), takes up to `limit` expired tasks out of their user's and name's
listing indexes (from `ends`) and their kept bytes off their user's byte count, removes up to `limit` expired worker
registrations, forgets up to `limit` users not leased for 30 days (their tenant
hash: counts, estimate, saved tag; a user that returns starts afresh at the floor),
brings users more than the lead bound ahead of the floor back to it (bound_lead),
and looks at about `limit` names of the dedup hash (HSCAN, from where the last call
stopped: meta 'dedup_at'), dropping those whose task no longer waits.
It first places the intake's first tasks (as a lease call does), so tasks pushed one at a
time reach their lanes while no worker leases. Workers call it periodically; running it
twice is harmless.

ARGV[1] limit         entries to remove per registry
ARGV[2] ordering      'aging' | 'strict' (placing the intake)
ARGV[3] horizon_us

Reply: the number of registry entries and worker registrations removed.
]]
-- @include now
-- @include forget_workers
-- @include keys
-- @include unindex_task
-- @include intake_head
-- @include place_intake
-- @include bound_lead
-- @include bytes_add

local K = {prefix = KEYS[1], finished = KEYS[2], failed = KEYS[3], canceled = KEYS[4],
  workers = KEYS[5], workers_seen = KEYS[6], ends = KEYS[7], active = KEYS[8],
  intake = KEYS[9], ring = KEYS[10], capped = KEYS[11], meta = KEYS[12], queued = KEYS[13],
  dedup = KEYS[14], backlog = KEYS[15]}
local ms = now()
local limit = tonumber(ARGV[1])
local entries = intake_head(K)
if #entries > 0 then place_intake(K, ARGV[2], tonumber(ARGV[3]), entries) end
local removed = 0
for _, registry in ipairs({K.finished, K.failed, K.canceled}) do
  local expired = math.min(redis.call('ZCOUNT', registry, '-inf', ms), limit)
  if expired > 0 then
    removed = removed + redis.call('ZREMRANGEBYRANK', registry, 0, expired - 1)
  end
end
for _, entry in ipairs(redis.call('ZRANGEBYSCORE', K.ends, '-inf', ms, 'LIMIT', 0, limit)) do
  local user, name, id = string.match(entry, '^([^\n]*)\n([^\n]*)\n(.*)$')
  -- a task pushed again under the same id since is indexed anew: leave it be
  if id and redis.call('EXISTS', task_key(K, id)) == 0 then
    unindex_task(K, id, user, name)
    local kept = redis.call('HGET', kept_key(K, user), id)  -- what it kept, counted
    if kept then
      bytes_add(K, user, -kept)
      redis.call('HDEL', kept_key(K, user), id)
    end
  end
  redis.call('ZREM', K.ends, entry)
end
-- users not leased for 30 days
local idle = redis.call('ZRANGEBYSCORE', K.active, '-inf', ms - 2592000000, 'LIMIT', 0, limit)
for _, user in ipairs(idle) do
  -- a user keeps the mirrors of its limits (set_user_limits) and its count (ring_count)
  local tk = tenant_key(K, user)
  local mirrors = {'group', 'weight', 'counted', 'share'}
  local kept = redis.call('HMGET', tk, unpack(mirrors))
  redis.call('DEL', tk)
  local back = {}
  for i, field in ipairs(mirrors) do
    if kept[i] then back[#back + 1] = field; back[#back + 1] = kept[i] end
  end
  if #back > 0 then redis.call('HSET', tk, unpack(back)) end
  redis.call('ZREM', K.active, user)
end
-- dedup names of tasks that no longer wait (a push would replace them; a key not
-- pushed again would keep its name for ever)
local scan = redis.call('HSCAN', K.dedup, redis.call('HGET', K.meta, 'dedup_at') or '0',
  'COUNT', limit)
local names = scan[2]
for i = 1, #names, 2 do
  local state = redis.call('HGET', task_key(K, names[i + 1]), 'state')
  if state ~= 'QUEUED' and state ~= 'SCHEDULED' and state ~= 'DEFERRED' then
    redis.call('HDEL', K.dedup, names[i])
  end
end
if scan[1] == '0' then
  redis.call('HDEL', K.meta, 'dedup_at')
else
  redis.call('HSET', K.meta, 'dedup_at', scan[1])
end
bound_lead(K, limit)
return removed + #idle + forget_workers(K, ms, limit)
