-- @include has_ready
-- @include ring_join
-- release_slot(prefix, user): a leased task of the user ended; lower its in-flight
-- count and let it back into the ring when its cap no longer holds it out.
local function release_slot(prefix, user)
  local n = redis.call('HINCRBY', prefix .. 'inflight', user, -1)
  if n <= 0 then redis.call('HDEL', prefix .. 'inflight', user) end
  if redis.call('SISMEMBER', prefix .. 'capped', user) == 1 then
    local cap = tonumber(redis.call('HGET', prefix .. 'caps', user) or '0')
    if cap == 0 or n < cap then
      redis.call('SREM', prefix .. 'capped', user)
      if has_ready(prefix, user) then ring_join(prefix, user) end
    end
  end
end
