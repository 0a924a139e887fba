-- @include keys
-- last_op(K, id, state, op): the 'op' record of a task (see replayed), read from its
-- tombstone when the task's hash is already gone (`state` nil: it ended and expired).
local function last_op(K, id, state, op)
  if state then return op end
  local gone = redis.call('GET', gone_key(K, id))
  if not gone then return nil end
  local sp = string.find(gone, ' ', 1, true)
  return sp and string.sub(gone, sp + 1) or nil
end
