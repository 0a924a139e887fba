#!lua flags=allow-oom
--[[
remove_schedule: delete a schedule. Tasks it already enqueued stay.

ARGV[1] id    schedule id
ARGV[2] req   request id (unique per call; the same when a call is resent)

The schedule's hash is replaced by a one-minute tombstone holding the request's
answer, so a resend answers 1 again.

Reply: 1 removed, 0 no such schedule.
]]
-- @include keys
-- @include replayed
-- @include signal_schedules

local K = {prefix = KEYS[1], schedules = KEYS[2], schedules_wake = KEYS[3]}
local id, req = ARGV[1], ARGV[2]
local sk = schedule_key(K, id)
local stored = redis.call('HMGET', sk, 'spec', 'op')
if not stored[1] then
  return tonumber(replayed(stored[2], req) or '0')
end
redis.call('DEL', sk)
redis.call('HSET', sk, 'op', req .. ' 1')
redis.call('PEXPIRE', sk, 60000)
redis.call('ZREM', K.schedules, id)
signal_schedules(K)
return 1
