-- @include keys
-- @include ring_join
-- @include lane_score
-- enqueue_ready(K, id, user, prio, us, ms, ordering, horizon_us, state_set): put a
-- task into its user's lane (critical list or normal sorted set) in state QUEUED
-- (state_set: the caller already wrote the state field).
local function enqueue_ready(K, id, user, prio, us, ms, ordering, horizon_us, state_set)
  if prio >= 6 then
    redis.call('RPUSH', critical_key(K, user), id)
  else
    redis.call('ZADD', normal_key(K, user), lane_score(prio, us, ordering, horizon_us), id)
  end
  redis.call('ZADD', K.queued, ms, id)
  if not state_set then redis.call('HSET', task_key(K, id), 'state', 'QUEUED') end
  ring_join(K, user)
end
