-- @include keys
-- @include slot_members
-- constraint_extend(K, id, deadline, cons, cost): a heartbeat moved task `id`'s lease
-- deadline; its concurrency buckets hold it (every slot it holds: `cost`, the task's
-- 'cost' field, nil or false for 1) until then too. `cons`: the task's 'cons' field as
-- the caller read it (false: none).
local function constraint_extend(K, id, deadline, cons, cost)
  if not cons then return end
  for _, b in ipairs(cjson.decode(cons)) do
    redis.call('ZADD', constraint_held_key(K, b), 'XX', unpack(slot_members(id, cost, deadline)))
  end
end
