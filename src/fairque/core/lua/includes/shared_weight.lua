-- @include keys
-- @include share_bound
-- shared_weight(K, w, group, share, turns): the weight a lease of a user of weight `w`
-- is charged at on a counted queue (ring_count), in time mode (`turns`: in count mode,
-- its turns per round, where shares do not hold, its group's included):
-- * a tenant of a group (`group`) holds its weight's part of the group's weight, shared
--   over the weights of the group's tenants in the ring (the group's 'active'); a
--   group's own share (its hash's 'share') first holds the group's weight between its
--   floor and ceiling of the ring's top-level weights;
-- * a share (`share`: '<floor> <ceiling>', fractions; 0 and 1 for none) then holds the
--   user between its floor and its ceiling of the ring's top-level weights (meta
--   'weights'): below its floor it is charged at the weight that makes its part of
--   them the floor, above its ceiling at the one that makes it the ceiling. Alone in the
--   ring (nobody else waits) a weight stays as it is: a ceiling does not hold it back.
local function shared_weight(K, w, group, share, turns)
  local total  -- the ring's top-level weights, read when a share needs them
  if group then
    local g = redis.call('HMGET', group_key(K, group), 'weight', 'active', 'share')
    local gw = tonumber(g[1] or '1')
    if g[3] and not turns then
      total = tonumber(redis.call('HGET', K.meta, 'weights') or '0')
      gw = share_bound(gw, g[3], total)
    end
    w = w * gw / math.max(tonumber(g[2] or '0'), w)
  end
  if share then
    total = total or tonumber(redis.call('HGET', K.meta, 'weights') or '0')
    w = share_bound(w, share, total)
  end
  return w
end
