-- @include end_attempt
-- @include finalize
-- @include release_dependents
-- @include replayed
-- @include last_op
-- complete_task(prefix, id, token, has_result, result, ms, us, ordering, horizon_us):
-- finish a leased task if `token` still holds its lease, store its result (when the
-- task keeps results) and release the dependents waiting only for it. A resend of a
-- completion that succeeded succeeds again and changes nothing. Returns
-- {1 or 0 (lease lost), dependents made ready}.
local function complete_task(prefix, id, token, has_result, result, ms, us, ordering, horizon_us)
  local tk = prefix .. 'task:' .. id
  local req = 'L' .. token
  local f = redis.call('HMGET', tk, 'state', 'lease', 'user', 'keep_result', 'result_ttl', 'op')
  if f[1] ~= 'STARTED' or f[2] ~= token then
    if replayed(last_op(prefix, id, f[1], f[6]), req) == 'FINISHED' then return {1, 0} end
    return {0, 0}
  end
  end_attempt(prefix, id, f[3], ms)
  redis.call('HDEL', tk, 'error')
  if has_result and f[4] == '1' then redis.call('HSET', tk, 'result', result) end
  local ready = 0
  if redis.call('EXISTS', prefix .. 'deps:blocked:' .. id) == 1 then
    ready = release_dependents(prefix, id, ms, us, ordering, horizon_us)
  end
  finalize(prefix, id, 'FINISHED', 'finished', ms, tonumber(f[5]), 'completed', req .. ' FINISHED')
  return {1, ready}
end
