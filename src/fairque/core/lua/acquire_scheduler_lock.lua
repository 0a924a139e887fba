#!lua flags=allow-oom
--[[
acquire_scheduler_lock: become the leading scheduler of the queue, if no other
scheduler holds the lock.

ARGV[1] token    the caller's token (unique per scheduler process)
ARGV[2] ttl_ms   how long the lock lasts without renewal

A caller that already holds the lock keeps it for ttl_ms more (so a resend of a
successful acquire succeeds again).

Reply: {1, ttl_ms} acquired (or held) | {0, ms until the holder's lock expires}
]]
local K = {prefix = KEYS[1], scheduler_lock = KEYS[2]}
local token, ttl = ARGV[1], tonumber(ARGV[2])
local holder = redis.call('GET', K.scheduler_lock)
if holder and holder ~= token then
  return {0, math.max(redis.call('PTTL', K.scheduler_lock), 0)}
end
redis.call('SET', K.scheduler_lock, token, 'PX', ttl)
return {1, ttl}
