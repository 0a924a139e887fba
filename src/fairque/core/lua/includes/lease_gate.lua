-- @include keys
-- @include slot_members
-- lease_gate(K, user, id, cost, ms, deadline, capping, group_caps, groups): the gate of
-- the caps, for the task `id` of `user` (of `cost` slots) that the take stage found and
-- neither a constraint nor the worker's names held back. Answers `slots, cap, held_cap,
-- gheld, full`:
-- * `slots`: what the lease holds in its user's held set, its cost, at most the user's
--   cap (`cap`, 0: none; read only on a queue with caps, `capping`). A task of cost > 1
--   that does not fit in the cap's free slots is `full` (true): it goes back to the
--   head of its lane and its user waits, capped, for slots to free (a task dearer than
--   the cap starts only when its user holds nothing).
-- * on a queue with group caps (`group_caps`), a grouped tenant's lease also takes
--   slots of its group, whether or not the group has a cap yet (so a cap set later
--   counts the leases already running): `gheld`, the group, its slots written here
--   (at most the group's cap). A group at its cap is the answer `full` (the group's
--   name): it holds its tenants out as they come up, each in the group's capped set,
--   and group_release lets them back. `groups` caches each user's group (false: none).
-- * `held_cap`: whether the lease holds a slot of a cap (its user's or its group's):
--   the task's 'capped' field, so its worker leases nothing ahead for its slot (a lease
--   ahead would come before this one ends and its cap frees, and take another's task).
local function lease_gate(K, user, id, cost, ms, deadline, capping, group_caps, groups)
  local slots, cap = cost, 0
  if capping then
    cap = tonumber(redis.call('HGET', K.caps, user) or '0')
    if cap > 0 and cost > 1 then
      if slots > cap then slots = cap end
      local used = redis.call('ZCOUNT', held_key(K, user), '(' .. ms, '+inf')
      if used > 0 and used + slots > cap then return slots, cap, true, nil, true end
    end
  end
  local held_cap = cap > 0
  if not group_caps then return slots, cap, held_cap, nil, false end
  local g = groups[user]
  if g == nil then
    g = redis.call('HGET', tenant_key(K, user), 'group')
    groups[user] = g
  end
  if not g then return slots, cap, held_cap, nil, false end
  local gslots = cost
  local gh = group_held_key(K, g)
  local gcap = tonumber(redis.call('HGET', group_key(K, g), 'cap') or '0')
  if gcap > 0 then
    held_cap = true
    gslots = math.min(cost, gcap)
    local used = redis.call('ZCOUNT', gh, '(' .. ms, '+inf')
    if used >= gcap or (used > 0 and used + gslots > gcap) then
      return slots, cap, held_cap, nil, g
    end
  end
  if gslots > 1 then
    redis.call('ZADD', gh, unpack(slot_members(id, gslots, deadline)))
  else
    redis.call('ZADD', gh, deadline, id)
  end
  return slots, cap, held_cap, g, false
end
