#!lua
--[[
add_schedule: store a new schedule (see fairque.schedules).

ARGV[1] id        schedule id
ARGV[2] spec      the definition as canonical JSON (payload and enabled apart)
ARGV[3] timing    the fields that place the slots, as canonical JSON
ARGV[4] payload   the task payload, serialized
ARGV[5] enabled   1 | 0 (0: added paused)

A schedule whose id exists with the same definition and payload is left as it is
(whatever its enabled flag), so a resend, or a deploy script run twice, is a no-op.
The new schedule's cursor and interval anchor are the server's time: no slot at or
before the moment it is added fires.

Reply: the schedule's hash (HGETALL).
Errors: 'FQERR -22 <id>' (ScheduleExists) when the id holds a different definition.
]]
-- @include now
-- @include keys
-- @include signal_schedules

local K = {prefix = KEYS[1], schedules = KEYS[2], schedules_wake = KEYS[3]}
local id, spec, timing, payload, enabled = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local sk = schedule_key(K, id)
local stored = redis.call('HMGET', sk, 'spec', 'payload')
if stored[1] then
  if stored[1] == spec and stored[2] == payload then return redis.call('HGETALL', sk) end
  return redis.error_reply('FQERR -22 schedule ' .. id .. ' already exists with another definition')
end
local ms = now()
redis.call('DEL', sk)  -- a removed schedule's tombstone
redis.call('HSET', sk, 'spec', spec, 'timing', timing, 'payload', payload, 'enabled', enabled,
  'rev', 1, 'anchor', ms, 'cursor', ms, 'fired', 0, 'skipped', 0, 'created', ms, 'updated', ms)
redis.call('ZADD', K.schedules, enabled == '1' and 0 or '+inf', id)
signal_schedules(K)
return redis.call('HGETALL', sk)
