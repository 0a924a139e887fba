#!lua flags=allow-oom
--[[
remove_constraint: remove a constraint. Its parked tasks go back to their lanes in
their places, its buckets' state is deleted; tasks already pushed keep the bucket
names, which no longer limit anything.

ARGV[1] id           the constraint id
ARGV[2] req          request id (unique per call; the same when a call is resent)

Reply: 1 removed (also for a resend of the call that removed it), 0 no such constraint.
]]
-- @include keys
-- @include constraint_release
-- @include signal_wake

local K = {prefix = KEYS[1], constraints = KEYS[2], constraint_due = KEYS[3], meta = KEYS[4],
  ring = KEYS[5], capped = KEYS[6], wake = KEYS[7]}
local id, req = ARGV[1], ARGV[2]
local record = fetch_key(K, req)
if redis.call('GET', record) == 'removed' then return 1 end
if redis.call('HDEL', K.constraints, id) == 0 then return 0 end
local bk = constraint_buckets_key(K, id)
local moved = 0
for _, b in ipairs(redis.call('SMEMBERS', bk)) do
  local pk = constraint_parked_key(K, b)
  moved = moved + constraint_release(K, b, redis.call('ZCARD', pk))
  redis.call('DEL', pk, constraint_rate_key(K, b), constraint_held_key(K, b),
    constraint_order_key(K, b))
  redis.call('ZREM', K.constraint_due, b)
end
redis.call('DEL', bk)
if moved > 0 then signal_wake(K, moved) end
redis.call('HINCRBY', K.constraints, '~version', 1)
redis.call('SET', record, 'removed', 'PX', 60000)
return 1
