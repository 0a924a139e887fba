-- @include keys
-- group_count(K, user, joining): a user of a queue with groups (meta 'grouped') joined
-- the ring (`joining` true) or left it: its group's 'active' (the weights of the
-- group's tenants in the ring, which its weight is shared over) moves by its weight.
-- What a user added is kept in its tenant hash ('counted': '<weight> <group>') and is
-- what leaving takes back, so a weight or group changed meanwhile leaves no residue,
-- and a join of a user already counted counts it once. A user with no group adds
-- nothing.
local function group_count(K, user, joining)
  local tk = tenant_key(K, user)
  local f = redis.call('HMGET', tk, 'group', 'weight', 'counted')
  if f[3] then
    local w, g = string.match(f[3], '^(%d+) (.*)$')
    redis.call('HINCRBY', group_key(K, g), 'active', -w)
    redis.call('HDEL', tk, 'counted')
  end
  if joining and f[1] then
    local w = f[2] or '1'
    redis.call('HINCRBY', group_key(K, f[1]), 'active', w)
    redis.call('HSET', tk, 'counted', w .. ' ' .. f[1])
  end
end
