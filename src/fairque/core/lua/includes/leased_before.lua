-- @include keys
-- @include lease_fence
-- leased_before(K, req): the tasks that request `req` already leased (each the flat
-- HGETALL of its hash, those still held under the same token), or nil when `req` is
-- new. See lease_request.
local function leased_before(K, req)
  local before = redis.call('GET', fetch_key(K, req))
  if not before then return nil end
  local again = {}
  local held = cjson.decode(before)
  for i = 1, #held, 2 do
    if lease_fence(K, held[i], tostring(held[i + 1])) then
      again[#again + 1] = redis.call('HGETALL', task_key(K, held[i]))
    end
  end
  return again
end
