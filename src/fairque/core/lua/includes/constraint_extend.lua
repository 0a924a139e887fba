-- @include keys
-- constraint_extend(K, id, deadline, cons): a heartbeat moved task `id`'s lease deadline;
-- its concurrency buckets hold it until then too. `cons`: the task's 'cons' field as
-- the caller read it (false: none).
local function constraint_extend(K, id, deadline, cons)
  if not cons then return end
  for _, b in ipairs(cjson.decode(cons)) do
    redis.call('ZADD', constraint_held_key(K, b), 'XX', deadline, id)
  end
end
