-- @include keys
-- @include detach_waiting
-- @include finalize
-- @include backlog_add
-- cascade_failure(K, root, ms, ttl_ms): `root` ended without finishing (FAILED or
-- CANCELED). Its DEFERRED dependents are CANCELED with a reason naming the upstream,
-- transitively, unless they chose on_dep_fail='wait': those keep waiting so that a
-- retry of the upstream can still release them. Returns how many were canceled.
local function cascade_failure(K, root, ms, ttl_ms)
  local pending, i, canceled = {root}, 1, 0
  while i <= #pending do
    local up = pending[i]
    i = i + 1
    local bk = deps_blocked_key(K, up)
    local up_state = redis.call('HGET', task_key(K, up), 'state') or 'EXPIRED'
    for _, down in ipairs(redis.call('SMEMBERS', bk)) do
      local dk = task_key(K, down)
      local f = redis.call('HMGET', dk, 'state', 'on_dep_fail', 'user')
      if f[1] == 'DEFERRED' and f[2] ~= 'wait' then
        detach_waiting(K, down)
        redis.call('ZREM', K.deferred, down)
        backlog_add(K, f[3], -1)
        redis.call('HSET', dk, 'error', 'dependency ' .. up .. ' is ' .. up_state)
        finalize(K, down, 'CANCELED', K.canceled, ms, ttl_ms, 'canceled')
        canceled = canceled + 1
        pending[#pending + 1] = down
      elseif f[1] ~= 'DEFERRED' then
        redis.call('SREM', bk, down)
      end
    end
  end
  return canceled
end
