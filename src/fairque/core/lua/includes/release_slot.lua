-- @include keys
-- @include has_ready
-- @include ring_join
-- @include signal_wake
-- @include slot_members
-- release_slot(K, user, id, ms, cost): the lease of task `id` ended; drop it (all its
-- slots: `cost`, the task's 'cost' field, nil or false for 1) from the user's held
-- leases and let the user back into the ring when its cap no longer holds it out
-- (with the credit of a user its cap held out, fair_join_tag; waking an idle worker:
-- parked workers do not poll). In-flight work is counted from
-- unexpired leases, never from a counter.
local function release_slot(K, user, id, ms, cost)
  local held = held_key(K, user)
  if cost then
    redis.call('ZREM', held, unpack(slot_members(id, cost)))
  else
    redis.call('ZREM', held, id)
  end
  if redis.call('SISMEMBER', K.capped, user) == 1 then
    local cap = tonumber(redis.call('HGET', K.caps, user) or '0')
    if cap == 0 or redis.call('ZCOUNT', held, '(' .. ms, '+inf') < cap then
      redis.call('SREM', K.capped, user)
      if has_ready(K, user) then
        ring_join(K, user, cap > 0 and cap or nil)
        signal_wake(K, 1)
      end
    end
  end
end
