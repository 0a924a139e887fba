-- @include keys
-- lease_fence(K, id, token, ...): read task `id`'s 'state', 'lease' and the fields named
-- after `token` (HMGET order: state, lease, ...). Returns whether `token` holds the
-- task's current lease (it is STARTED under that token), and the fields read. A caller
-- whose token does not hold the lease changes nothing: that is the fence.
local function lease_fence(K, id, token, ...)
  local f = redis.call('HMGET', task_key(K, id), 'state', 'lease', ...)
  return f[1] == 'STARTED' and f[2] == token, f
end
