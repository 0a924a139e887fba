-- leased_before(prefix, req): the tasks that request `req` already leased (each the
-- flat HGETALL of its hash, those still held under the same token), or nil when `req`
-- is new. See lease_request.
local function leased_before(prefix, req)
  local before = redis.call('GET', prefix .. 'fetch:' .. req)
  if not before then return nil end
  local again = {}
  local held = cjson.decode(before)
  for i = 1, #held, 2 do
    local tk = prefix .. 'task:' .. held[i]
    local f = redis.call('HMGET', tk, 'state', 'lease')
    if f[1] == 'STARTED' and f[2] == tostring(held[i + 1]) then
      again[#again + 1] = redis.call('HGETALL', tk)
    end
  end
  return again
end
