#!lua flags=allow-oom
--[[
set_group_limits: set a group's weight, share, in-flight cap and backlog quota (each only
when given).
Its weight is the share of worker time its tenants hold together, as a multiple of a
group of weight 1 (a tenant with no group is a group of one, of its own weight); its
share, a floor and a ceiling of the ring's top-level weights, holds that part as a
tenant's share holds a tenant's. Kept in 'group_weights', 'group_shares' and
'group_caps' and mirrored in the group's hash ('weight', 'share', 'cap'), where the lease path reads them with the group's 'active' (the
weights of its tenants in the ring); a new weight moves the group's part of the ring's
top-level weights (meta 'weights') when it has tenants in the ring. Takes effect at the
next lease. Setting the same values again changes nothing.

ARGV[1] group
ARGV[2] weight      1..1000 (1 = default; stored only when > 1); '' unchanged
ARGV[3] floor       the least part of the worker time its tenants hold together while
                    they have work (0: none); '' unchanged
ARGV[4] ceiling     the most while others wait (1: none); '' unchanged
ARGV[5] cap         the most slots its tenants' leases hold at once (0: none), counted
                    from unexpired leases (the group's 'gheld' set); '' unchanged. The
                    first cap marks the queue 'group_caps' (meta), so leases look for it,
                    and the last one taken away clears the mark (leases made under a cap
                    still free its slots as they end); tenants the cap held out come
                    back as far as the new cap lets them
ARGV[6] max_queued  backlog quota: at most this many of its tenants' tasks in QUEUED,
                    SCHEDULED or DEFERRED together (0: none); '' unchanged. The first
                    quota makes the queue keep its groups' backlogs (the group hash's
                    'backlog', the sum of its tenants' backlogs, counted from theirs now):
                    the field "\0groups" in the backlog hash (backlog_add reads it) and in
                    the quotas (so push_one.lua leaves its fast path), and meta
                    'group_backlogs' (the lease path reads it with its other marks);
                    meta 'group_quotas' counts the groups with one, and the last one
                    taken away stops keeping them (those fields and the groups'
                    'backlog' go)

Reply: 1.
]]
-- @include keys
-- @include now
-- @include group_release
-- @include share_set

local K = {prefix = KEYS[1], group_weights = KEYS[2], meta = KEYS[3],
  group_shares = KEYS[4], group_caps = KEYS[5], ring = KEYS[6], capped = KEYS[7],
  caps = KEYS[8], wake = KEYS[9], groups = KEYS[10], backlog = KEYS[11], quotas = KEYS[12]}
local group, weight = ARGV[1], ARGV[2]
local gk = group_key(K, group)
if weight ~= '' then
  if tonumber(weight) > 1 then
    redis.call('HSET', K.group_weights, group, weight)
    redis.call('HSET', gk, 'weight', weight)
  else
    redis.call('HDEL', K.group_weights, group)
    redis.call('HDEL', gk, 'weight')
  end
  -- a group with tenants in the ring counts in the ring's top-level weights
  -- (ring_count): at its new weight from now on
  local was = redis.call('HGET', gk, 'counted')
  if was then
    redis.call('HINCRBY', K.meta, 'weights', weight - was)
    redis.call('HSET', gk, 'counted', weight)
  end
end
if ARGV[3] ~= '' or ARGV[4] ~= '' then
  share_set(K.group_shares, group, gk, ARGV[3], ARGV[4])
end
if ARGV[5] ~= '' then
  if tonumber(ARGV[5]) > 0 then
    redis.call('HSET', K.group_caps, group, ARGV[5])
    redis.call('HSET', gk, 'cap', ARGV[5])
    redis.call('HSET', K.meta, 'group_caps', '1')
  else
    redis.call('HDEL', K.group_caps, group)
    redis.call('HDEL', gk, 'cap')
    if redis.call('HLEN', K.group_caps) == 0 then redis.call('HDEL', K.meta, 'group_caps') end
  end
  group_release(K, nil, group, nil, now())
end
if ARGV[6] ~= '' then
  if tonumber(ARGV[6]) > 0 then
    if redis.call('HSET', gk, 'quota', ARGV[6]) == 1 then  -- a group's first quota
      redis.call('HINCRBY', K.meta, 'group_quotas', 1)
    end
    if redis.call('HEXISTS', K.backlog, '\0groups') == 0 then
      -- the first group quota: every group's backlog from its tenants' backlogs now
      local groups = redis.call('HGETALL', K.groups)
      for i = 1, #groups, 2 do
        local b = redis.call('HGET', K.backlog, groups[i])
        if b then redis.call('HINCRBY', group_key(K, groups[i + 1]), 'backlog', b) end
      end
      redis.call('HSET', K.backlog, '\0groups', '1')
      redis.call('HSET', K.quotas, '\0groups', '1')
      redis.call('HSET', K.meta, 'group_backlogs', '1')
    end
  elseif redis.call('HDEL', gk, 'quota') == 1
      and redis.call('HINCRBY', K.meta, 'group_quotas', -1) <= 0 then
    -- the last group quota gone: the groups' backlogs are no longer kept
    local groups = redis.call('HGETALL', K.groups)
    for i = 2, #groups, 2 do redis.call('HDEL', group_key(K, groups[i]), 'backlog') end
    redis.call('HDEL', K.backlog, '\0groups')
    redis.call('HDEL', K.quotas, '\0groups')
    redis.call('HDEL', K.meta, 'group_backlogs', 'group_quotas')
  end
end
return 1
