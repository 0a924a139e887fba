--[[
maintain: bounded housekeeping that keeps a queue from growing without an operator.
Removes up to `limit` expired ids from each terminal registry (their task data has
already expired) and up to `limit` expired worker registrations. Workers call it
periodically; running it twice is harmless.

KEYS[1] prefix        fq:{<queue>}:  per-task and per-user keys derive from it (includes/keys.lua)
KEYS[2] finished      FINISHED registry: task id -> expiry time
KEYS[3] failed        FAILED registry: task id -> expiry time
KEYS[4] canceled      CANCELED registry: task id -> expiry time
KEYS[5] workers       worker id -> '<last heartbeat ms> <JSON description>'
KEYS[6] workers_seen  worker id -> registration expiry (ms)

ARGV[1] limit         entries to remove per registry

Reply: the number of entries removed.
]]
-- @include now
-- @include forget_workers

local K = {prefix = KEYS[1], finished = KEYS[2], failed = KEYS[3], canceled = KEYS[4],
  workers = KEYS[5], workers_seen = KEYS[6]}
local ms = now()
local limit = tonumber(ARGV[1])
local removed = 0
for _, registry in ipairs({K.finished, K.failed, K.canceled}) do
  local expired = math.min(redis.call('ZCOUNT', registry, '-inf', ms), limit)
  if expired > 0 then
    removed = removed + redis.call('ZREMRANGEBYRANK', registry, 0, expired - 1)
  end
end
return removed + forget_workers(K, ms, limit)
