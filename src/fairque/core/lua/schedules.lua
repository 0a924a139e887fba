#!lua flags=allow-oom
--[[
schedules: list the queue's schedules, soonest next slot first (paused ones last).

ARGV[1] limit   at most this many schedules

Reply: {id, <HGETALL of its hash>, id, <HGETALL>, ...}
]]
-- @include keys

local K = {prefix = KEYS[1], schedules = KEYS[2]}
local out = {}
for _, id in ipairs(redis.call('ZRANGE', K.schedules, 0, tonumber(ARGV[1]) - 1)) do
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGETALL', schedule_key(K, id))
end
return out
