-- @include keys
-- constraint_park(K, id, b, score, when): task `id` (taken from its lane, where it had
-- `score`) is over the limit of bucket `b`: keep it in the bucket's parked set with
-- that score (it goes back to its place when the limit frees) and make the bucket due
-- at `when` (ms) unless it is due earlier already. The task stays QUEUED.
local function constraint_park(K, id, b, score, when)
  redis.call('ZADD', constraint_parked_key(K, b), score, id)
  redis.call('HSET', task_key(K, id), 'parked', b)
  redis.call('SADD', constraint_buckets_key(K, string.match(b, '^[^:]+')), b)
  redis.call('ZADD', K.constraint_due, 'LT', when, b)
end
