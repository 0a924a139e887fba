-- @include keys
-- @include release_slot
-- @include constraint_free
-- end_attempt(K, id, user, ms, ...): take a STARTED task out of the lease registry,
-- drop its lease fields (and the further fields named after `ms`) and free its user's
-- in-flight slot and its constraint buckets' slots.
local function end_attempt(K, id, user, ms, ...)
  redis.call('ZREM', K.leases, id)
  constraint_free(K, id, ms)
  redis.call('HDEL', task_key(K, id), 'lease', 'worker', 'deadline', ...)
  release_slot(K, user, id, ms)
end
