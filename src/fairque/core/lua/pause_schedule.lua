#!lua flags=allow-oom
--[[
pause_schedule: stop a schedule from firing until it is resumed.

ARGV[1] id   schedule id

Pausing a paused schedule changes nothing (so a resend is a no-op).

Reply: the schedule's hash (HGETALL).
Errors: 'FQERR -21 <id>' (ScheduleNotFound) when no such schedule exists.
]]
-- @include now
-- @include keys
-- @include signal_schedules

local K = {prefix = KEYS[1], schedules = KEYS[2], schedules_wake = KEYS[3]}
local id = ARGV[1]
local sk = schedule_key(K, id)
local enabled = redis.call('HGET', sk, 'enabled')
if not enabled then
  return redis.error_reply('FQERR -21 no schedule ' .. id)
end
if enabled == '1' then
  local ms = now()
  redis.call('HSET', sk, 'enabled', '0', 'updated', ms)
  redis.call('HINCRBY', sk, 'rev', 1)
  redis.call('ZADD', K.schedules, '+inf', id)
  signal_schedules(K)
end
return redis.call('HGETALL', sk)
