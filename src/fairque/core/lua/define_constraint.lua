#!lua flags=allow-oom
--[[
define_constraint: add a constraint, or replace its definition. A changed definition
moves the queue's constraints version on (the hash's '~version' field, which no
constraint id can be; a purge keeps it) (clients match new pushes against the new
set) and makes every bucket of the constraint with parked tasks due now, so a raised
limit lets them go at once. Defining the same definition again changes nothing.

ARGV[1] id           the constraint id
ARGV[2] definition   its stored form (JSON)
ARGV[3] max          most constraints the queue may hold

Reply: the constraints version after the call (a resend answers the same).
Errors: 'FQERR -33' (ValidationError) when the queue already holds `max` constraints.
]]
-- @include now
-- @include keys
-- @include signal_wake

local K = {prefix = KEYS[1], constraints = KEYS[2], constraint_due = KEYS[3], wake = KEYS[4]}
local id, definition = ARGV[1], ARGV[2]
local old = redis.call('HGET', K.constraints, id)
if old == definition then
  return tonumber(redis.call('HGET', K.constraints, '~version') or '0')
end
if not old and redis.call('HLEN', K.constraints) > tonumber(ARGV[3]) then
  return redis.error_reply('FQERR -33 the queue holds ' .. ARGV[3] .. ' constraints already')
end
redis.call('HSET', K.constraints, id, definition)
local ms = now()
local woke = false
for _, b in ipairs(redis.call('SMEMBERS', constraint_buckets_key(K, id))) do
  if redis.call('EXISTS', constraint_parked_key(K, b)) == 1 then
    redis.call('ZADD', K.constraint_due, ms, b)
    woke = true
  end
end
if woke then signal_wake(K, 1) end
return redis.call('HINCRBY', K.constraints, '~version', 1)
