-- @include keys
-- constraint_extend(K, id, deadline): a heartbeat moved task `id`'s lease deadline;
-- its concurrency buckets hold it until then too.
local function constraint_extend(K, id, deadline)
  local cons = redis.call('HGET', task_key(K, id), 'cons')
  if not cons then return end
  for _, b in ipairs(cjson.decode(cons)) do
    redis.call('ZADD', constraint_held_key(K, b), 'XX', deadline, id)
  end
end
