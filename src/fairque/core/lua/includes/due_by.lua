-- due_by(K, at): something in the lease registry or the SCHEDULED registry may come due
-- at `at` (ms): lower the queue's 'due' hint to it. The hint (meta 'due') is a time
-- before which no lease expires and no scheduled task is due, so a lease call's
-- maintenance reads no registry until then (see maintenance). Every writer of an entry
-- that may be earlier than every entry before it calls this; an absent hint means
-- "look", so there is nothing to lower.
local function due_by(K, at)
  local due = redis.call('HGET', K.meta, 'due')
  if due and at < due + 0 then
    redis.call('HSET', K.meta, 'due', string.format('%d', at))
  end
end
