-- @include keys
-- @include slot_members
-- @include constraint_order
-- constraint_take(K, id, plan, deadline, now_us, user, charge): task `id` of `user`
-- starts under the buckets of `plan` (constraint_check's): each rate bucket's GCRA
-- arrival time moves on by the task's tokens (one interval each), each concurrency
-- bucket holds the lease's slots until `deadline`, and the task takes its tag in each
-- global bucket's fair order that it did not wait in (`charge`: a function that gives
-- what it is charged there, constraint_charge's).
local function constraint_take(K, id, plan, deadline, now_us, user, charge)
  local c
  for _, p in ipairs(plan) do
    local b = p[1]
    if p[6] then
      c = c or charge()
      constraint_order(K, b, user, c, true)
    end
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
