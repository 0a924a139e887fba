#!lua flags=allow-oom
--[[
renew_scheduler_lock: the leading scheduler extends its lock.

ARGV[1] token    the caller's token
ARGV[2] ttl_ms   the lock lasts this long from now

A resend extends it again, from its own arrival: the same answer as a second renewal.

Reply: 1 renewed | 0 the caller no longer holds the lock (it expired or another
       scheduler took it): it must stop firing.
]]
local K = {prefix = KEYS[1], scheduler_lock = KEYS[2]}
if redis.call('GET', K.scheduler_lock) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', K.scheduler_lock, tonumber(ARGV[2]))
return 1
