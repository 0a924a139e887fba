#!lua flags=allow-oom
--[[
due_schedules: what the leading scheduler reads each pass: the server's time, the
schedules due by then (or never planned yet), and when the next one is due.

ARGV[1] limit   at most this many due schedules

Reply: {now_ms, next_ms (the soonest slot after now; -1: none),
        {id, <HGETALL of its hash>, id, <HGETALL>, ...}}
]]
-- @include now
-- @include keys

local K = {prefix = KEYS[1], schedules = KEYS[2]}
local ms = now()
local due = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', K.schedules, '-inf', ms, 'LIMIT', 0,
    tonumber(ARGV[1]))) do
  due[#due + 1] = id
  due[#due + 1] = redis.call('HGETALL', schedule_key(K, id))
end
local later = redis.call('ZRANGEBYSCORE', K.schedules, '(' .. ms, '+inf', 'WITHSCORES',
  'LIMIT', 0, 1)
local next_ms = -1
if #later > 0 and tonumber(later[2]) < math.huge then next_ms = tonumber(later[2]) end
return {ms, next_ms, due}
