-- @include keys
-- @include has_ready
-- lease_take(K, user): the user's next task: the first of its critical lane, else the
-- lowest score of its normal lane. Returns the id (nil: none), its normal-lane score
-- (nil: it came from the critical lane) and whether the user has ready work left.
local function lease_take(K, user)
  local id = redis.call('LPOP', critical_key(K, user))
  if id then return id, nil, has_ready(K, user) end
  local normal = normal_key(K, user)
  local head = redis.call('ZPOPMIN', normal)
  -- its critical lane is empty: only the normal lane can hold more
  return head[1], head[2], head[1] ~= nil and redis.call('ZCARD', normal) > 0
end
