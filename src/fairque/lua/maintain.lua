--[[
maintain: bounded housekeeping that keeps a queue from growing without an operator.
Removes up to `limit` expired ids from each terminal registry (their task data has
already expired) and up to `limit` expired worker registrations. Workers call it
periodically; running it twice is harmless.

KEYS[1] prefix        fq:{<queue>}:
KEYS[2] finished      FINISHED registry (scored by expiry)
KEYS[3] failed        FAILED registry (scored by expiry)
KEYS[4] canceled      CANCELED registry (scored by expiry)
KEYS[5] workers
KEYS[6] workers_seen

ARGV[1] limit         entries to remove per registry

Reply: the number of entries removed.
]]
-- @include now
-- @include forget_workers

local ms = now()
local limit = tonumber(ARGV[1])
local removed = 0
for i = 2, 4 do
  local expired = math.min(redis.call('ZCOUNT', KEYS[i], '-inf', ms), limit)
  if expired > 0 then
    removed = removed + redis.call('ZREMRANGEBYRANK', KEYS[i], 0, expired - 1)
  end
end
return removed + forget_workers(KEYS[5], KEYS[6], ms, limit)
