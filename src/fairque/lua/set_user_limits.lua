--[[
set_user_limits: set a user's round-robin weight and in-flight cap, and re-evaluate its
place in the ring at once. Setting the same values again changes nothing.

KEYS[1] prefix      fq:{<queue>}:
KEYS[2] weights
KEYS[3] caps
KEYS[4] ring
KEYS[5] capped

ARGV[1] user
ARGV[2] weight      turns per round (1 = default; stored only when > 1)
ARGV[3] cap         maximum tasks in flight (0 = unlimited), counted from unexpired leases

Reply: 1.
]]
-- @include now
-- @include has_ready
-- @include ring_join

local prefix, user = KEYS[1], ARGV[1]
local weight, cap = tonumber(ARGV[2]), tonumber(ARGV[3])
if weight > 1 then
  redis.call('HSET', KEYS[2], user, weight)
else
  redis.call('HDEL', KEYS[2], user)
end
redis.call('HDEL', prefix .. 'turns', user)
local inflight = redis.call('ZCOUNT', prefix .. 'held:' .. user, '(' .. now(), '+inf')
if cap > 0 then
  redis.call('HSET', KEYS[3], user, cap)
else
  redis.call('HDEL', KEYS[3], user)
end
if cap > 0 and inflight >= cap then
  redis.call('ZREM', KEYS[4], user)
  redis.call('SADD', KEYS[5], user)
else
  redis.call('SREM', KEYS[5], user)
  if has_ready(prefix, user) then ring_join(prefix, user) end
end
return 1
