-- detach_waiting(prefix, id): forget which upstream tasks `id` waits for, in both
-- directions (its waiting set and its entry in each upstream's blocked set).
local function detach_waiting(prefix, id)
  local wk = prefix .. 'deps:waiting:' .. id
  for _, up in ipairs(redis.call('SMEMBERS', wk)) do
    redis.call('SREM', prefix .. 'deps:blocked:' .. up, id)
  end
  redis.call('DEL', wk)
end
