#!lua flags=allow-oom
--[[
lift_floor: bring a shard's ring up to the virtual time of the queue's other shards (time
mode), so a shard that was idle, or was just added by a resize, gives its tenants no
credit for the time it stood still: the client lifts it when its ring head stands far
below another shard's. The floor rises to `position`, and the users in the ring below it
move up to it in their order (at most LIFT_BATCH per call; the rest on the next call).
A lower position, or count mode, changes nothing; a resend finds nothing below.

ARGV[1] position  virtual us to lift to (another shard's ring head)

Reply: the floor after the call (the same answer when resent).
]]
-- @include fair_timed

local LIFT_BATCH = 1000
local K = {prefix = KEYS[1], ring = KEYS[2], meta = KEYS[3]}
local position = tonumber(ARGV[1])
local m = redis.call('HMGET', K.meta, 'fair', 'floor', 'joined')
local floor = tonumber(m[2] or '0')
if not fair_timed(m[1]) or position <= floor then return string.format('%d', floor) end
local low = redis.call('ZRANGEBYSCORE', K.ring, '-inf', '(' .. position, 'LIMIT', 0, LIFT_BATCH)
local joined = math.max(tonumber(m[3] or '-1'), position)
for i, user in ipairs(low) do
  joined = math.max(joined, position + (i - 1) * FAIR_STEP)
  redis.call('ZADD', K.ring, string.format('%d', position + (i - 1) * FAIR_STEP), user)
end
redis.call('HSET', K.meta, 'floor', string.format('%d', position), 'joined',
  string.format('%d', joined))
return string.format('%d', position)
