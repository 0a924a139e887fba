-- @include keys
-- @include slot_members
-- constraint_take(K, id, plan, deadline, now_us): task `id` starts under the buckets of
-- `plan` (constraint_check's): each rate bucket's GCRA arrival time moves on by the
-- task's tokens (one interval each), each concurrency bucket holds the lease's slots
-- until `deadline`.
local function constraint_take(K, id, plan, deadline, now_us)
  for _, p in ipairs(plan) do
    local b = p[1]
    if p[3] > 0 then
      local tat = p[4] + p[3]
      redis.call('SET', constraint_rate_key(K, b), string.format('%.0f', tat), 'PX',
        math.ceil((tat - now_us) / 1000) + 1000)
    end
    if p[5] > 1 then
      redis.call('ZADD', constraint_held_key(K, b), unpack(slot_members(id, p[5], deadline)))
    elseif p[5] > 0 then
      redis.call('ZADD', constraint_held_key(K, b), deadline, id)
    end
    redis.call('SADD', constraint_buckets_key(K, p[2]), b)
  end
end
