-- @include keys
-- @include release_slot
-- @include constraint_free
-- @include fair_settle
-- end_attempt(K, id, user, ms, cons, run, ...): take a STARTED task out of the lease
-- registry, drop its lease fields (and the further fields named after `run`) and free
-- its user's in-flight slot and its constraint buckets' slots. `cons`: the task's 'cons'
-- field as the caller read it (false: none), or nil to read it here. `run`: the
-- attempt as fair_settle takes it.
local function end_attempt(K, id, user, ms, cons, run, ...)
  redis.call('ZREM', K.leases, id)
  constraint_free(K, id, ms, cons)
  redis.call('HDEL', task_key(K, id), 'lease', 'deadline', 'fair', ...)
  release_slot(K, user, id, ms)
  fair_settle(K, user, run)
end
