-- @include keys
-- detach_waiting(K, id): forget which upstream tasks `id` waits for, in both
-- directions (its waiting set and its entry in each upstream's blocked set).
local function detach_waiting(K, id)
  local wk = deps_waiting_key(K, id)
  for _, up in ipairs(redis.call('SMEMBERS', wk)) do
    redis.call('SREM', deps_blocked_key(K, up), id)
  end
  redis.call('DEL', wk)
end
