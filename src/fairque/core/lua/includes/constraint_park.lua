-- @include keys
-- constraint_park(K, id, b, lane, when, tag): task `id` (taken from its lane, where it
-- had score `lane`) is over the limit of bucket `b`: keep it in the bucket's parked set
-- until the limit frees and make the bucket due at `when` (ms) unless it is due earlier
-- already. The task stays QUEUED. `tag`: its start tag in a global bucket's fair order
-- (constraint_order; kept in the task's 'ptag' with its lane score, so it goes back to
-- its place and a task parked again keeps its tag), nil in a per-user bucket (parked
-- by its lane score: one user's tasks in their lane's order).
local function constraint_park(K, id, b, lane, when, tag)
  if tag then
    redis.call('ZADD', constraint_parked_key(K, b), tag, id)
    redis.call('HSET', task_key(K, id), 'parked', b, 'ptag',
      string.format('%.17g %.17g %s', tag, lane, b))
  else
    redis.call('ZADD', constraint_parked_key(K, b), lane, id)
    redis.call('HSET', task_key(K, id), 'parked', b)
    redis.call('HDEL', task_key(K, id), 'ptag')
  end
  redis.call('SADD', constraint_buckets_key(K, string.match(b, '^[^:]+')), b)
  redis.call('ZADD', K.constraint_due, 'LT', when, b)
end
