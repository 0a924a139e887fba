-- @include keys
-- @include has_ready
-- @include leave_ring
-- @include pick_user
-- @include observe
-- @include now
-- @include constraint_check
-- @include constraint_take
-- @include constraint_park
-- @include constraint_due
-- lease_tasks(K, count, worker, lease_ms, ms, assigned, steal, any): lease up to
-- `count` ready tasks, choosing users round robin (see pick_user). A served user moves
-- to the ring's tail (after `weight` consecutive turns for a weighted user); a user
-- whose unexpired leases reach its in-flight cap leaves the ring until a slot frees.
-- Returns the leased tasks (each the flat HGETALL of its hash) and the flat list of
-- their (id, lease token) pairs. Each task's wait (ready -> leased: its QUEUED
-- registry time until now) goes to the 'wait' histogram.
-- Constraints (only when the queue has any: one HLEN otherwise): due constraint
-- buckets first put parked tasks back into their lanes; a task whose buckets are over
-- a limit is parked (constraint_park) and the same user's next task is tried, so a
-- limited task blocks neither other users nor its user's unlimited tasks.
local function lease_tasks(K, count, worker, lease_ms, ms, assigned, steal, any)
  local deadline = ms + lease_ms
  local out, tokens, waits = {}, {}, {}
  local guard, parks = 0, 0
  -- the hash holds the constraints and their version ('~version')
  local limited = redis.call('HLEN', K.constraints) > 1
  local now_us
  if limited then
    now_us = select(2, now())  -- GCRA works in microseconds
    constraint_due(K, ms, now_us, 64)
  end
  while #out < count and guard < count + 64 do
    guard = guard + 1
    local user = pick_user(K.ring, assigned, steal, any)
    if not user then break end
    local normal = normal_key(K, user)
    local id = redis.call('LPOP', critical_key(K, user))
    local more  -- the user has ready work left after this task
    local score  -- the task's normal-lane score (nil: the critical lane)
    if id then
      more = has_ready(K, user)
    else
      local head = redis.call('ZPOPMIN', normal)
      id, score = head[1], head[2]
      -- its critical lane is empty: only the normal lane can hold more
      more = id and redis.call('ZCARD', normal) > 0
    end
    local plan, blocked, free_at
    if id and limited then
      local cons = redis.call('HGET', task_key(K, id), 'cons')
      if cons then plan, blocked, free_at = constraint_check(K, cons, ms, now_us) end
    end
    if not id then
      leave_ring(K, user)
    elseif blocked then
      -- a critical task parks ahead of every normal-lane score, oldest first
      constraint_park(K, id, blocked, score or (ms - 4e15), free_at)
      if not more then leave_ring(K, user) end
      guard = guard - 1  -- the task left its lane: progress, bounded by `parks`
      parks = parks + 1
      if parks >= 256 then
        signal_wake(K, 1)  -- another call goes on from here
        break
      end
    else
      if not more then
        leave_ring(K, user)
      else
        local rotate = true
        local w = tonumber(redis.call('HGET', K.weights, user) or '1')
        if w > 1 then
          if redis.call('HINCRBY', K.turns, user, 1) < w then
            rotate = false
          else
            redis.call('HDEL', K.turns, user)
          end
        end
        if rotate then
          redis.call('ZADD', K.ring, redis.call('HINCRBY', K.meta, 'clock', 1), user)
        end
      end
      local held = held_key(K, user)
      redis.call('ZADD', held, deadline, id)
      local cap = tonumber(redis.call('HGET', K.caps, user) or '0')
      if cap > 0 and redis.call('ZCOUNT', held, '(' .. ms, '+inf') >= cap then
        leave_ring(K, user)
        redis.call('SADD', K.capped, user)
      end
      local token = redis.call('HINCRBY', K.meta, 'lease', 1)
      local tk = task_key(K, id)
      redis.call('HSET', tk, 'state', 'STARTED', 'lease', token, 'worker', worker,
        'deadline', deadline, 'started', ms)
      local ready_at = redis.call('ZSCORE', K.queued, id)
      if ready_at then
        waits[#waits + 1] = ms - tonumber(ready_at)
        redis.call('ZREM', K.queued, id)
      end
      redis.call('ZADD', K.leases, deadline, id)
      if plan then constraint_take(K, id, plan, deadline, now_us) end
      out[#out + 1] = redis.call('HGETALL', tk)
      tokens[#tokens + 1] = id
      tokens[#tokens + 1] = token
    end
  end
  if #out > 0 then
    redis.call('HINCRBY', K.stats, 'popped', #out)
    observe(K, 'wait', waits)
  end
  return out, tokens
end
