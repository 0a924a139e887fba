-- @include ring_join
-- @include lane_score
-- enqueue_ready(prefix, id, user, prio, us, ms, ordering, horizon_us, state_set): put a
-- task into its user's lane (critical list or normal sorted set) in state QUEUED
-- (state_set: the caller already wrote the state field).
local function enqueue_ready(prefix, id, user, prio, us, ms, ordering, horizon_us, state_set)
  if prio >= 6 then
    redis.call('RPUSH', prefix .. 'crit:' .. user, id)
  else
    redis.call('ZADD', prefix .. 'norm:' .. user, lane_score(prio, us, ordering, horizon_us), id)
  end
  redis.call('ZADD', prefix .. 'queued', ms, id)
  if not state_set then redis.call('HSET', prefix .. 'task:' .. id, 'state', 'QUEUED') end
  ring_join(prefix, user)
end
