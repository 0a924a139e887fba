-- @include keys
-- @include release_slot
-- @include constraint_free
-- @include fair_settle
-- end_attempt(K, id, user, ms, cons, cost, run, ...): take a STARTED task out of the
-- lease registry, drop its lease fields (and the further fields named after `run`) and
-- free its user's in-flight slots and its constraint buckets' slots. `cons` and `cost`:
-- the task's 'cons' and 'cost' fields as the caller read them (false: none), or nil to
-- read them here. `run`: the attempt as fair_settle takes it.
local function end_attempt(K, id, user, ms, cons, cost, run, ...)
  redis.call('ZREM', K.leases, id)
  if cons == nil then
    local f = redis.call('HMGET', task_key(K, id), 'cons', 'cost')
    cons, cost = f[1], f[2]
  end
  constraint_free(K, id, ms, cons, cost)
  redis.call('HDEL', task_key(K, id), 'lease', 'deadline', 'fair', ...)
  release_slot(K, user, id, ms, cost)
  fair_settle(K, user, run)
end
