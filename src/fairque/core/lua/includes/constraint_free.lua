-- @include keys
-- @include signal_wake
-- @include slot_members
-- constraint_free(K, id, ms, cons, cost): the lease of task `id` ended: it leaves its
-- constraint buckets' leases (all its slots: `cost`, the task's 'cost' field, nil or
-- false for 1), and a bucket with parked tasks becomes due now (an idle worker is woken
-- to lease them). `cons` is the task's 'cons' field when the caller has read it (false:
-- the task has none), nil to read it here (with the cost).
local function constraint_free(K, id, ms, cons, cost)
  if cons == nil then
    local f = redis.call('HMGET', task_key(K, id), 'cons', 'cost')
    cons, cost = f[1], f[2]
  end
  if not cons then return end
  for _, b in ipairs(cjson.decode(cons)) do
    if cost then
      redis.call('ZREM', constraint_held_key(K, b), unpack(slot_members(id, cost)))
    else
      redis.call('ZREM', constraint_held_key(K, b), id)
    end
    if redis.call('ZCARD', constraint_parked_key(K, b)) > 0 then
      redis.call('ZADD', K.constraint_due, 'LT', ms, b)
      signal_wake(K, 1)
    end
  end
end
