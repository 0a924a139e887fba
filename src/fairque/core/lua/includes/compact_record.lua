-- @include keys
-- compact_record(K, id, retried): a task that FINISHED keeps only what is read again
-- (its identity, its timing, its result, the records a resend is recognised by): its
-- payload, its lease, its charge, its parking and its last failure's fields go. A small
-- hash (compact encoding) shrinks as fields go; a hash that a large value (a payload
-- over COMPACT_VALUE bytes, or a failure's traceback: `retried`, an attempt failed
-- before) turned into the large encoding never shrinks back, so it is written anew. So
-- a server drained at its memory limit has room again as soon as the tasks are done.
local COMPACT_VALUE = 64  -- the servers' default hash-max-listpack-value
local function compact_record(K, id, retried)
  local tk = task_key(K, id)
  if not retried and redis.call('HSTRLEN', tk, 'payload') <= COMPACT_VALUE then
    redis.call('HDEL', tk, 'payload', 'lease', 'deadline', 'fair', 'capped')
    return
  end
  local all = redis.call('HGETALL', tk)
  local kept = {}
  for i = 1, #all, 2 do
    local f = all[i]
    if f ~= 'payload' and f ~= 'lease' and f ~= 'deadline' and f ~= 'fair'
        and f ~= 'parked' and f ~= 'ptag' and f ~= 'gheld' and f ~= 'capped' and f ~= 'error'
        and f ~= 'traceback' and f ~= 'reason' and f ~= 'details' and f ~= 'cut_lease' then
      kept[#kept + 1] = f
      kept[#kept + 1] = all[i + 1]
    end
  end
  redis.call('DEL', tk)
  if #kept > 0 then redis.call('HSET', tk, unpack(kept)) end
end
