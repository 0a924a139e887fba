-- @include keys
-- @include fair_timed
-- @include fair_first_est
-- constraint_charge(K, user, cost, timed, weigh): what a task of `cost` moves `user`'s
-- end on by in a global bucket's fair order (constraint_order); `weigh`: the lease's
-- shared_weight on a counted queue, else nil.
local function constraint_charge(K, user, cost, timed, weigh)
  local w = tonumber(redis.call('HGET', K.weights, user) or '1')
  local t = redis.call('HMGET', tenant_key(K, user), 'est', 'group', 'share')
  if weigh then
    if timed then
      w = weigh(K, w, t[2], t[3])
    elseif t[2] then
      w = weigh(K, w, t[2], nil, true)
    end
  end
  local est = 1
  if timed then est = tonumber(t[1] or '') or fair_first_est(K) end
  return est * 1000 * cost / w
end
