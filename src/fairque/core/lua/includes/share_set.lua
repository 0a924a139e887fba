-- share_set(registry, member, mirror, floor, ceiling): set `member`'s share of worker
-- time ('<floor> <ceiling>', fractions) in the `registry` hash and as the 'share' field
-- of the `mirror` hash, a bound given as '' kept as it was (0 and 1 when there was
-- none); a share that bounds nothing (floor 0, ceiling 1) is removed from both. Returns
-- whether a share is kept.
local function share_set(registry, member, mirror, floor, ceiling)
  local was = redis.call('HGET', registry, member)
  local low, high = '0', '1'
  if was then low, high = string.match(was, '^(%S+) (%S+)$') end
  if floor ~= '' then low = floor end
  if ceiling ~= '' then high = ceiling end
  if tonumber(low) > 0 or tonumber(high) < 1 then
    redis.call('HSET', registry, member, low .. ' ' .. high)
    redis.call('HSET', mirror, 'share', low .. ' ' .. high)
    return true
  end
  redis.call('HDEL', registry, member)
  redis.call('HDEL', mirror, 'share')
  return false
end
