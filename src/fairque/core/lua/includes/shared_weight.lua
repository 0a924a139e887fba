-- @include keys
-- shared_weight(K, w, group, share): the weight a lease of a user of weight `w` is
-- charged at on a counted queue (ring_count), in time mode:
-- * a tenant of a group (`group`) holds its weight's part of the group's weight, shared
--   over the weights of the group's tenants in the ring (the group's 'active');
-- * a share (`share`: '<floor> <ceiling>', fractions; 0 and 1 for none) then holds the
--   user between its floor and its ceiling of the ring's top-level weights (meta
--   'weights'): below its floor it is charged at the weight that makes its part of
--   them the floor, above its ceiling at the one that makes it the ceiling. A user alone
--   in the ring keeps its weight: nobody waits, so the ceiling does not hold it back.
local function shared_weight(K, w, group, share)
  if group then
    local g = redis.call('HMGET', group_key(K, group), 'weight', 'active')
    w = w * (g[1] or 1) / math.max(tonumber(g[2] or '0'), w)
  end
  if not share then return w end
  local floor, ceiling = string.match(share, '^(%S+) (%S+)$')
  floor, ceiling = tonumber(floor), tonumber(ceiling)
  local others = tonumber(redis.call('HGET', K.meta, 'weights') or '0') - w
  if others <= 0 then return w end
  local part = w / (w + others)
  if part < floor then return floor * others / (1 - floor) end
  if part > ceiling then return ceiling * others / (1 - ceiling) end
  return w
end
