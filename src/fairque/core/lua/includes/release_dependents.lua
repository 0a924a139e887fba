-- @include keys
-- @include task_stock
-- @include mono_us
-- @include enqueue_ready
-- @include due_by
-- release_dependents(K, id, ms, us, ordering, horizon_us): `id` FINISHED. Remove
-- it from each dependent's waiting set; a dependent with nothing left to wait for
-- moves DEFERRED -> QUEUED (or SCHEDULED when its execute_after is still ahead).
-- Returns how many became ready now.
local function release_dependents(K, id, ms, us, ordering, horizon_us)
  local bk = deps_blocked_key(K, id)
  local ready = 0
  local clock = nil
  for _, down in ipairs(redis.call('SMEMBERS', bk)) do
    local wk = deps_waiting_key(K, down)
    redis.call('SREM', wk, id)
    if redis.call('SCARD', wk) == 0 then
      redis.call('DEL', wk)
      local dk = task_key(K, down)
      local f = redis.call('HMGET', dk, 'state', 'user', 'prio', 'run_at')
      if f[1] == 'DEFERRED' then
        redis.call('ZREM', K.deferred, down)
        local due = tonumber(f[4] or '0')
        if due > ms then
          redis.call('HSET', dk, 'state', 'SCHEDULED')
          redis.call('ZADD', K.delayed, due, down)
          due_by(K, due)
        else
          clock = clock and clock + 1 or mono_us(K, us)
          local prio = tonumber(f[3] or task_stock())
          enqueue_ready(K, down, f[2], prio, clock, ms, ordering, horizon_us)
          ready = ready + 1
        end
      end
    end
  end
  redis.call('DEL', bk)
  if clock then redis.call('HSET', K.meta, 'mono', clock) end
  return ready
end
