-- @include keys
-- @include signal_wake
-- constraint_free(K, id, ms, cons): the lease of task `id` ended: it leaves its constraint
-- buckets' leases, and a bucket with parked tasks becomes due now (an idle worker is
-- woken to lease them). `cons` is the task's 'cons' field when the caller has read it
-- (false: the task has none), nil to read it here.
local function constraint_free(K, id, ms, cons)
  if cons == nil then cons = redis.call('HGET', task_key(K, id), 'cons') end
  if not cons then return end
  for _, b in ipairs(cjson.decode(cons)) do
    redis.call('ZREM', constraint_held_key(K, b), id)
    if redis.call('ZCARD', constraint_parked_key(K, b)) > 0 then
      redis.call('ZADD', K.constraint_due, 'LT', ms, b)
      signal_wake(K, 1)
    end
  end
end
