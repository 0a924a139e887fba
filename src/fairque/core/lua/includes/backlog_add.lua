-- @include keys
-- backlog_add(K, user, n): add `n` (negative: take) to the user's backlog, its tasks in
-- QUEUED, SCHEDULED or DEFERRED, which a push holds to the user's quota. A count that
-- reaches 0 leaves the hash (so does one below 0: tasks pushed before the backlog was
-- kept are not in it, and leave it without taking it below 0).
-- On a queue that keeps its groups' backlogs (a group's quota was set: the backlog
-- hash's field "\0groups", a name no user id can take), the user's group's backlog (its
-- group hash's 'backlog', the sum of its tenants' backlogs) moves as the user's did.
-- Whether the queue keeps them is read once per run, unless the caller says (`kept`:
-- the lease path reads the same mark in the queue's meta, 'group_backlogs').
local groups_kept
local function backlog_add(K, user, n, kept)
  local left = redis.call('HINCRBY', K.backlog, user, n)
  if left <= 0 then
    redis.call('HDEL', K.backlog, user)
    n = n - left
  end
  if kept == nil then
    if groups_kept == nil then groups_kept = redis.call('HEXISTS', K.backlog, '\0groups') == 1 end
    kept = groups_kept
  end
  if not kept or n == 0 then return end
  local group = redis.call('HGET', tenant_key(K, user), 'group')
  if group then
    local gk = group_key(K, group)
    if redis.call('HINCRBY', gk, 'backlog', n) <= 0 then redis.call('HDEL', gk, 'backlog') end
  end
end
