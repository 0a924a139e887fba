-- @include keys
-- ring_count(K, user, joining): on a queue whose ring is counted (meta 'counted': it
-- has groups or shares, set_user_limits), a user joined the ring (`joining` true) or
-- left it. Two sums follow the ring's members exactly:
-- * its group's 'active': the weights of the group's tenants in the ring, which the
--   group's weight is shared over;
-- * the queue's 'weights' (meta): the weights at the ring's top level, each ungrouped
--   user's own and each group's with a tenant in the ring (once), which a share (floor,
--   ceiling) is a fraction of.
-- What a user added is kept in its tenant hash ('counted': '<weight> <group>', the group
-- '' for none; a group's part of 'weights' in the group's hash, 'counted') and is what
-- leaving takes back, so a weight or group changed meanwhile leaves no residue, and a
-- join of a user already counted counts it once. Weights are the mirrors in the tenant
-- hash ('weight', absent for 1) and the group's hash ('weight').
local function ring_count(K, user, joining)
  local tk = tenant_key(K, user)
  local f = redis.call('HMGET', tk, 'group', 'weight', 'counted')
  if f[3] then
    local w, g = string.match(f[3], '^(%d+) (.*)$')
    if g == '' then
      redis.call('HINCRBY', K.meta, 'weights', -w)
    else
      local gk = group_key(K, g)
      if redis.call('HINCRBY', gk, 'active', -w) <= 0 then
        local gw = redis.call('HGET', gk, 'counted')
        if gw then
          redis.call('HINCRBY', K.meta, 'weights', -gw)
          redis.call('HDEL', gk, 'counted')
        end
      end
    end
    redis.call('HDEL', tk, 'counted')
  end
  if not joining then return end
  local w, g = f[2] or '1', f[1] or ''
  if g == '' then
    redis.call('HINCRBY', K.meta, 'weights', w)
  else
    local gk = group_key(K, g)
    redis.call('HINCRBY', gk, 'active', w)
    if redis.call('HEXISTS', gk, 'counted') == 0 then
      local gw = redis.call('HGET', gk, 'weight') or '1'
      redis.call('HINCRBY', K.meta, 'weights', gw)
      redis.call('HSET', gk, 'counted', gw)
    end
  end
  redis.call('HSET', tk, 'counted', w .. ' ' .. g)
end
