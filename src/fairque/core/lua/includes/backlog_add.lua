-- backlog_add(K, user, n): add `n` (negative: take) to the user's backlog, its tasks in
-- QUEUED, SCHEDULED or DEFERRED, which a push holds to the user's quota. A count that
-- reaches 0 leaves the hash (so does one below 0: tasks pushed before the backlog was
-- kept are not in it, and leave it without taking it below 0).
local function backlog_add(K, user, n)
  if redis.call('HINCRBY', K.backlog, user, n) <= 0 then redis.call('HDEL', K.backlog, user) end
end
