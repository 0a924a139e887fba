-- @include keys
-- @include slot_members
-- @include constraint_extend
-- extend_slots(K, id, user, deadline, cons, cost, gheld): a heartbeat moved task `id`'s
-- lease deadline: every slot it holds (its user's, its concurrency buckets', its
-- group's) is held until then too. `cons`, `cost` and `gheld`: the task's fields as the
-- caller read them (false: none).
local function extend_slots(K, id, user, deadline, cons, cost, gheld)
  local held = held_key(K, user)
  redis.call('ZADD', held, deadline, id)
  if cost then redis.call('ZADD', held, 'XX', unpack(slot_members(id, cost, deadline))) end
  constraint_extend(K, id, deadline, cons, cost)
  if gheld then
    redis.call('ZADD', group_held_key(K, gheld), 'XX', unpack(slot_members(id, cost, deadline)))
  end
end
