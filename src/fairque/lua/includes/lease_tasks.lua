-- @include has_ready
-- @include pick_user
-- lease_tasks(prefix, count, worker, lease_ms, ms, assigned, steal, any): lease up to
-- `count` ready tasks, choosing users round robin (see pick_user). A served user moves
-- to the ring's tail (after `weight` consecutive turns for a weighted user); a user
-- whose unexpired leases reach its in-flight cap leaves the ring until a slot frees.
-- Returns the leased tasks (each the flat HGETALL of its hash) and the flat list of
-- their (id, lease token) pairs.
local function lease_tasks(prefix, count, worker, lease_ms, ms, assigned, steal, any)
  local ring = prefix .. 'ring'
  local deadline = ms + lease_ms
  local out, tokens = {}, {}
  local guard = 0
  while #out < count and guard < count + 64 do
    guard = guard + 1
    local user = pick_user(ring, assigned, steal, any)
    if not user then break end
    local id = redis.call('LPOP', prefix .. 'crit:' .. user)
    if not id then id = redis.call('ZPOPMIN', prefix .. 'norm:' .. user)[1] end
    if not id then
      redis.call('ZREM', ring, user)
      redis.call('HDEL', prefix .. 'turns', user)
    else
      if not has_ready(prefix, user) then
        redis.call('ZREM', ring, user)
        redis.call('HDEL', prefix .. 'turns', user)
      else
        local rotate = true
        local w = tonumber(redis.call('HGET', prefix .. 'weights', user) or '1')
        if w > 1 then
          if redis.call('HINCRBY', prefix .. 'turns', user, 1) < w then
            rotate = false
          else
            redis.call('HDEL', prefix .. 'turns', user)
          end
        end
        if rotate then
          redis.call('ZADD', ring, redis.call('HINCRBY', prefix .. 'meta', 'clock', 1), user)
        end
      end
      local held = prefix .. 'held:' .. user
      redis.call('ZADD', held, deadline, id)
      local cap = tonumber(redis.call('HGET', prefix .. 'caps', user) or '0')
      if cap > 0 and redis.call('ZCOUNT', held, '(' .. ms, '+inf') >= cap then
        redis.call('ZREM', ring, user)
        redis.call('HDEL', prefix .. 'turns', user)
        redis.call('SADD', prefix .. 'capped', user)
      end
      local token = redis.call('HINCRBY', prefix .. 'meta', 'lease', 1)
      local tk = prefix .. 'task:' .. id
      redis.call('HSET', tk, 'state', 'STARTED', 'lease', token, 'worker', worker,
        'deadline', deadline, 'started', ms)
      redis.call('ZREM', prefix .. 'queued', id)
      redis.call('ZADD', prefix .. 'leases', deadline, id)
      out[#out + 1] = redis.call('HGETALL', tk)
      tokens[#tokens + 1] = id
      tokens[#tokens + 1] = token
    end
  end
  if #out > 0 then redis.call('HINCRBY', prefix .. 'stats', 'popped', #out) end
  return out, tokens
end
