-- @include fair_timed
-- fair_first_est(K): what a user with no measured run yet is charged per lease (ms): the
-- queue's mean attempt so far (stats 'busy_us' over the attempts that ended, 'completed'
-- and 'failed_attempts', as the processes that ran them flushed them: up to a second
-- behind), or FAIR_FIRST_EST before any. Read once per lease call, and only when such a
-- user is served: the counters it reads are kept anyway, so no completion writes an
-- estimate for the queue.
local function fair_first_est(K)
  local s = redis.call('HMGET', K.stats, 'busy_us', 'completed', 'failed_attempts')
  local n = (s[2] or 0) + (s[3] or 0)
  if n > 0 then return (s[1] or 0) / n / 1000 end
  return FAIR_FIRST_EST
end
