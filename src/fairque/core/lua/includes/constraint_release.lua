-- @include keys
-- @include ring_join
-- constraint_release(K, b, n): put up to `n` tasks parked in bucket `b` back into
-- their lanes, oldest first, each with the score it had there (a critical task at the
-- head of its list). Returns how many went back.
local function constraint_release(K, b, n)
  if n <= 0 then return 0 end
  local popped = redis.call('ZPOPMIN', constraint_parked_key(K, b), n)
  local moved = 0
  for i = #popped - 1, 1, -2 do
    local id, score = popped[i], popped[i + 1]
    local tk = task_key(K, id)
    local f = redis.call('HMGET', tk, 'user', 'prio', 'state', 'parked')
    if f[3] == 'QUEUED' and f[4] == b then
      redis.call('HDEL', tk, 'parked')
      if f[2] == '6' then  -- CRITICAL (a stock task stores no priority)
        redis.call('LPUSH', critical_key(K, f[1]), id)
      else
        redis.call('ZADD', normal_key(K, f[1]), score, id)
      end
      ring_join(K, f[1])
      moved = moved + 1
    end
  end
  return moved
end
