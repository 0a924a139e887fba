#!lua flags=allow-oom
--[[
update_schedule: replace a schedule's definition, payload and enabled flag.

ARGV[1] id        schedule id
ARGV[2] spec      the definition as canonical JSON (payload and enabled apart)
ARGV[3] timing    the fields that place the slots, as canonical JSON
ARGV[4] payload   the task payload, serialized
ARGV[5] enabled   1 | 0

Nothing changes when the definition, payload and flag are the ones stored (so a
resend is a no-op). Otherwise the revision grows (a firing planned from the old one
is refused) and the schedule is planned again; when the timing changed, the cursor
and interval anchor move to the server's time (slots of the old timing not yet
fired are dropped). A schedule enabled again plans from now, as resume does.

Reply: the schedule's hash (HGETALL).
Errors: 'FQERR -21 <id>' (ScheduleNotFound) when no such schedule exists.
]]
-- @include now
-- @include keys
-- @include signal_schedules

local K = {prefix = KEYS[1], schedules = KEYS[2], schedules_wake = KEYS[3]}
local id, spec, timing, payload, enabled = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local sk = schedule_key(K, id)
local stored = redis.call('HMGET', sk, 'spec', 'payload', 'enabled', 'timing', 'cursor')
if not stored[1] then
  return redis.error_reply('FQERR -21 no schedule ' .. id)
end
if stored[1] == spec and stored[2] == payload and stored[3] == enabled then
  return redis.call('HGETALL', sk)
end
local ms = now()
redis.call('HSET', sk, 'spec', spec, 'timing', timing, 'payload', payload, 'enabled', enabled,
  'updated', ms, 'next', '')
redis.call('HINCRBY', sk, 'rev', 1)
if stored[4] ~= timing then
  redis.call('HSET', sk, 'anchor', ms, 'cursor', ms)
elseif enabled == '1' and stored[3] ~= '1' then
  redis.call('HSET', sk, 'cursor', math.max(tonumber(stored[5]), ms))
end
redis.call('ZADD', K.schedules, enabled == '1' and 0 or '+inf', id)
signal_schedules(K)
return redis.call('HGETALL', sk)
