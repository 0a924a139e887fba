-- @include keys
-- @include release_slot
-- @include constraint_free
-- @include fair_settle
-- @include slot_members
-- @include has_ready
-- @include ring_join
-- @include signal_wake
-- end_attempt(K, id, user, ms, cons, cost, gheld, run, ...): take a STARTED task out of
-- the lease registry, drop its lease fields (and the further fields named after `run`)
-- and free its user's in-flight slots, its constraint buckets' slots and its group's.
-- `cons`, `cost` and `gheld`: the task's 'cons', 'cost' and 'gheld' fields as the caller
-- read them (false: none), or nil to read them here. `run`: the attempt as fair_settle
-- takes it. Returns the attempt's run in us (fair_settle).
local function end_attempt(K, id, user, ms, cons, cost, gheld, run, ...)
  redis.call('ZREM', K.leases, id)
  if cons == nil then
    local f = redis.call('HMGET', task_key(K, id), 'cons', 'cost', 'gheld')
    cons, cost, gheld = f[1], f[2], f[3]
  end
  constraint_free(K, id, ms, cons, cost)
  redis.call('HDEL', task_key(K, id), 'lease', 'deadline', 'fair', 'gheld', 'capped', ...)
  release_slot(K, user, id, ms, cost)
  if gheld then  -- (made only on this path: a script makes every function it defines)
-- @include group_release
    group_release(K, id, gheld, cost, ms)
  end
  return fair_settle(K, user, run)
end
