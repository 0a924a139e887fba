-- @include keys
-- lease_untake(K, user, id, lane): put a task lease_take took back where it was (the
-- head of its critical lane, or its normal lane at its score `lane`).
local function lease_untake(K, user, id, lane)
  if lane then
    redis.call('ZADD', normal_key(K, user), lane, id)
  else
    redis.call('LPUSH', critical_key(K, user), id)
  end
end
