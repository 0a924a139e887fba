--[[
workers: the registered workers with the age of their last heartbeat.

KEYS[1] prefix        fq:{<queue>}:
KEYS[2] workers
KEYS[3] workers_seen

Reply: flat list {info JSON, milliseconds since last heartbeat, ...}.
]]
-- @include now

local ms = now()
local out = {}
local seen = redis.call('ZRANGE', KEYS[3], 0, -1, 'WITHSCORES')
for i = 1, #seen, 2 do
  local info = redis.call('HGET', KEYS[2], seen[i])
  if info then
    out[#out + 1] = info
    out[#out + 1] = ms - tonumber(seen[i + 1])
  end
end
return out
