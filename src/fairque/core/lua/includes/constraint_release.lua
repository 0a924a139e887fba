-- @include keys
-- @include ring_join
-- constraint_release(K, b, n): put up to `n` tasks parked in bucket `b` back into
-- their lanes, first in the bucket's order (a global bucket's fair order, else oldest
-- first), each with the score it had there (a critical task at the head of its list).
-- A global bucket's virtual time moves to the last tag let go, and its order state goes
-- once nothing is parked. Returns how many went back.
local function constraint_release(K, b, n)
  if n <= 0 then return 0 end
  local pk = constraint_parked_key(K, b)
  local popped = redis.call('ZPOPMIN', pk, n)
  local moved, v = 0, nil
  for i = #popped - 1, 1, -2 do
    local id, score = popped[i], popped[i + 1]
    local tk = task_key(K, id)
    local f = redis.call('HMGET', tk, 'user', 'prio', 'state', 'parked', 'ptag')
    if f[3] == 'QUEUED' and f[4] == b then
      redis.call('HDEL', tk, 'parked')
      if f[5] then  -- parked in a global bucket's fair order: '<tag> <lane> <bucket>'
        local tag, lane, pb = string.match(f[5], '^(%S+) (%S+) (.*)$')
        if pb == b then
          score = lane
          if not v then v = tonumber(tag) end
        end
      end
      if f[2] == '6' then  -- CRITICAL (a stock task stores no priority)
        redis.call('LPUSH', critical_key(K, f[1]), id)
      else
        redis.call('ZADD', normal_key(K, f[1]), score, id)
      end
      ring_join(K, f[1])
      moved = moved + 1
    end
  end
  if redis.call('EXISTS', pk) == 0 then
    redis.call('DEL', constraint_order_key(K, b))
  elseif v then
    local ok = constraint_order_key(K, b)
    if v > tonumber(redis.call('HGET', ok, '') or '0') then
      redis.call('HSET', ok, '', string.format('%.17g', v))
    end
  end
  return moved
end
