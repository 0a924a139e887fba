-- @include release_slot
-- end_attempt(prefix, id, user, ms): take a STARTED task out of the lease registry,
-- drop its lease fields and free its user's in-flight slot.
local function end_attempt(prefix, id, user, ms)
  redis.call('ZREM', prefix .. 'leases', id)
  redis.call('HDEL', prefix .. 'task:' .. id, 'lease', 'worker', 'deadline')
  release_slot(prefix, user, id, ms)
end
