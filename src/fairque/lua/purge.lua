--[[
purge: delete a queue's tasks and state, at most `limit` tasks per call so a huge
queue never blocks the server for long; call again until it reports 0 remaining.
The last call also removes the ring, counters, user lanes and limits. Registered
workers are kept.

KEYS[1] prefix      fq:{<queue>}:
KEYS[2] delayed     SCHEDULED
KEYS[3] deferred    DEFERRED
KEYS[4] queued      QUEUED
KEYS[5] leases      STARTED
KEYS[6] finished    FINISHED
KEYS[7] failed      FAILED
KEYS[8] canceled    CANCELED

ARGV[1] limit       tasks to delete in this call

Reply: {tasks deleted by this call, tasks remaining}.
]]

local prefix = KEYS[1]
local budget = tonumber(ARGV[1])
local deleted = 0
for i = 2, 8 do
  while budget > 0 do
    local ids = redis.call('ZRANGE', KEYS[i], 0, math.min(budget, 500) - 1)
    if #ids == 0 then break end
    for _, id in ipairs(ids) do
      local tk = prefix .. 'task:' .. id
      local user = redis.call('HGET', tk, 'user')
      if user then
        redis.call('DEL', prefix .. 'crit:' .. user, prefix .. 'norm:' .. user,
          prefix .. 'held:' .. user)
      end
      redis.call('DEL', tk, prefix .. 'deps:waiting:' .. id, prefix .. 'deps:blocked:' .. id,
        prefix .. 'watch:' .. id, prefix .. 'done:' .. id, prefix .. 'gone:' .. id)
    end
    redis.call('ZREM', KEYS[i], unpack(ids))
    budget = budget - #ids
    deleted = deleted + #ids
  end
end
local remaining = 0
for i = 2, 8 do remaining = remaining + redis.call('ZCARD', KEYS[i]) end
if remaining == 0 then
  for _, u in ipairs(redis.call('ZRANGE', prefix .. 'ring', 0, -1)) do
    redis.call('DEL', prefix .. 'crit:' .. u, prefix .. 'norm:' .. u)
  end
  for _, u in ipairs(redis.call('SMEMBERS', prefix .. 'capped')) do
    redis.call('DEL', prefix .. 'crit:' .. u, prefix .. 'norm:' .. u)
  end
  for _, k in ipairs({'ring', 'capped', 'meta', 'stats', 'turns', 'weights', 'caps', 'wake'}) do
    redis.call('DEL', prefix .. k)
  end
end
return {deleted, remaining}
