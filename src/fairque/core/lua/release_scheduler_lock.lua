#!lua flags=allow-oom
--[[
release_scheduler_lock: the leading scheduler gives the lock up (compare and delete:
only the holder's token deletes it), and pushes a hand-over token that wakes one
waiting scheduler, which takes the lock at once instead of when its wait ends.

ARGV[1] token   the caller's token

Reply: 1 released (a resend of a release that succeeded answers 1 again) | 0 the
       caller did not hold the lock.
]]
local K = {prefix = KEYS[1], scheduler_lock = KEYS[2], scheduler_released = KEYS[3],
  scheduler_handover = KEYS[4]}
local token = ARGV[1]
if redis.call('GET', K.scheduler_lock) == token then
  redis.call('DEL', K.scheduler_lock)
  redis.call('SET', K.scheduler_released, token, 'PX', 60000)
  -- one token: one waiting scheduler wakes (a resend does not get here again)
  redis.call('DEL', K.scheduler_handover)
  redis.call('LPUSH', K.scheduler_handover, token)
  redis.call('PEXPIRE', K.scheduler_handover, 60000)
  return 1
end
if redis.call('GET', K.scheduler_released) == token then return 1 end
return 0
