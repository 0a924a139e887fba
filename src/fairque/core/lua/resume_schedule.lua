#!lua flags=allow-oom
--[[
resume_schedule: let a paused schedule fire again, from now on.

ARGV[1] id   schedule id

The slots that passed while the schedule was paused are not fired: its cursor moves
to the server's time. Resuming a running schedule changes nothing (so a resend is a
no-op).

Reply: the schedule's hash (HGETALL).
Errors: 'FQERR -21 <id>' (ScheduleNotFound) when no such schedule exists.
]]
-- @include now
-- @include keys
-- @include signal_schedules

local K = {prefix = KEYS[1], schedules = KEYS[2], schedules_wake = KEYS[3]}
local id = ARGV[1]
local sk = schedule_key(K, id)
local stored = redis.call('HMGET', sk, 'enabled', 'cursor')
if not stored[1] then
  return redis.error_reply('FQERR -21 no schedule ' .. id)
end
if stored[1] ~= '1' then
  local ms = now()
  redis.call('HSET', sk, 'enabled', '1', 'updated', ms, 'next', '',
    'cursor', math.max(tonumber(stored[2]), ms))
  redis.call('HINCRBY', sk, 'rev', 1)
  redis.call('ZADD', K.schedules, 0, id)
  signal_schedules(K)
end
return redis.call('HGETALL', sk)
