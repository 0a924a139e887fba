#!lua flags=allow-oom
--[[
set_group_limits: set a group's weight: the share of worker time its tenants hold
together, as a multiple of a group of weight 1 (a tenant with no group is a group of
one, of its own weight). Kept in 'group_weights' and mirrored in the group's hash
('weight'), where the lease path reads it with the group's 'active' (the weights of its
tenants in the ring), and moves the group's part of the ring's top-level weights (meta
'weights') when it has tenants in the ring. Takes effect at the next lease. Setting the same value again
changes nothing.

ARGV[1] group
ARGV[2] weight      1..1000 (1 = default; stored only when > 1)

Reply: 1.
]]
-- @include keys

local K = {prefix = KEYS[1], group_weights = KEYS[2], meta = KEYS[3]}
local group, weight = ARGV[1], ARGV[2]
local gk = group_key(K, group)
if tonumber(weight) > 1 then
  redis.call('HSET', K.group_weights, group, weight)
  redis.call('HSET', gk, 'weight', weight)
else
  redis.call('HDEL', K.group_weights, group)
  redis.call('HDEL', gk, 'weight')
end
-- a group with tenants in the ring counts in the ring's top-level weights (ring_count):
-- at its new weight from now on
local was = redis.call('HGET', gk, 'counted')
if was then
  redis.call('HINCRBY', K.meta, 'weights', weight - was)
  redis.call('HSET', gk, 'counted', weight)
end
return 1
