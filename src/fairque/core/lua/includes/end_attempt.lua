-- @include keys
-- @include release_slot
-- @include constraint_free
-- end_attempt(K, id, user, ms, cons, ...): take a STARTED task out of the lease
-- registry, drop its lease fields (and the further fields named after `cons`) and free
-- its user's in-flight slot and its constraint buckets' slots. `cons`: the task's 'cons'
-- field as the caller read it (false: none), or nil to read it here.
local function end_attempt(K, id, user, ms, cons, ...)
  redis.call('ZREM', K.leases, id)
  constraint_free(K, id, ms, cons)
  redis.call('HDEL', task_key(K, id), 'lease', 'worker', 'deadline', ...)
  release_slot(K, user, id, ms)
end
