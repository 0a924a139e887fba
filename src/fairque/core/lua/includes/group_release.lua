-- @include keys
-- @include slot_members
-- @include has_ready
-- @include ring_join
-- @include signal_wake
-- group_release(K, id, group, cost, ms): the lease of task `id`, which held `cost` slots
-- (nil or false: 1) of `group`'s in-flight cap (the task's 'gheld'), ended: its slots
-- leave the group's held leases, and as many of the group's tenants held out by the
-- group's cap as there are free slots go back into the ring (each also let out by its
-- own cap), waking idle workers. Slots are counted from unexpired leases. `id` nil: no
-- lease ended, the cap changed (set_group_limits).
local function group_release(K, id, group, cost, ms)
  local gh = group_held_key(K, group)
  if id then redis.call('ZREM', gh, unpack(slot_members(id, cost))) end
  local gc = group_capped_key(K, group)
  if redis.call('SCARD', gc) == 0 then return end
  local cap = tonumber(redis.call('HGET', group_key(K, group), 'cap') or '0')
  local free = cap > 0 and cap - redis.call('ZCOUNT', gh, '(' .. ms, '+inf') or 1000
  if free <= 0 then return end
  local woken = 0
  local back = redis.call('SMEMBERS', gc)
  while #back > free do table.remove(back) end
  redis.call('SREM', gc, unpack(back))
  for _, user in ipairs(back) do
    local own = tonumber(redis.call('HGET', K.caps, user) or '0')
    if own == 0 or redis.call('ZCOUNT', held_key(K, user), '(' .. ms, '+inf') < own then
      redis.call('SREM', K.capped, user)
      if has_ready(K, user) then
        ring_join(K, user)
        woken = woken + 1
      end
    end
  end
  if woken > 0 then signal_wake(K, woken) end
end
