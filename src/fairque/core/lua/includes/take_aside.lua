-- @include keys
-- @include constraint_release
-- @include aside_bucket
-- take_aside(K, names, n): a worker that handles `names` (a set; false: any name) is
-- about to lease `n` tasks: put the tasks set aside under those names (set_aside) back
-- into their lanes, oldest first, up to `n` per user and max(n, 100) in all (at most 64
-- users per name, picked at random past that), so that the lease serves them by the
-- same rule as every other task. Returns how many went back.
local function take_aside(K, names, n)
  local budget = math.max(n, 100)
  local moved = 0
  for _, name in ipairs(redis.call('SMEMBERS', K.aside)) do
    if budget <= 0 then break end
    if not names or names[name] then
      local uk = aside_users_key(K, name)
      local users
      if redis.call('SCARD', uk) > 64 then
        users = redis.call('SRANDMEMBER', uk, 64)
      else
        users = redis.call('SMEMBERS', uk)
      end
      for _, user in ipairs(users) do
        if budget <= 0 then break end
        local b = aside_bucket(user, name)
        local back = constraint_release(K, b, math.min(n, budget))
        moved, budget = moved + back, budget - back
        if redis.call('EXISTS', constraint_parked_key(K, b)) == 0 then
          redis.call('SREM', uk, user)
        end
      end
      if redis.call('EXISTS', uk) == 0 then redis.call('SREM', K.aside, name) end
    end
  end
  return moved
end
