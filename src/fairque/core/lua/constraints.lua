#!lua flags=allow-oom
--[[
constraints: the queue's constraints, their version and (when asked) their use per
bucket: unexpired leases and parked tasks. Read only.

ARGV[1] id           one constraint's id, or '' for all
ARGV[2] usage        '1' count each bucket's use, '0' definitions only

Reply: {version, {id, definition, {bucket, running, parked, ...}}, ...}.
]]
-- @include now
-- @include keys

local K = {prefix = KEYS[1], constraints = KEYS[2]}
local ms = now()
local out = {tonumber(redis.call('HGET', K.constraints, '~version') or '0')}
local flat
if ARGV[1] == '' then
  flat = redis.call('HGETALL', K.constraints)
  for i = 1, #flat, 2 do  -- the version is no constraint
    if flat[i] == '~version' then
      table.remove(flat, i + 1)
      table.remove(flat, i)
      break
    end
  end
else
  local one = redis.call('HGET', K.constraints, ARGV[1])
  flat = one and {ARGV[1], one} or {}
end
for i = 1, #flat, 2 do
  local use = {}
  if ARGV[2] == '1' then
    local buckets = redis.call('SMEMBERS', constraint_buckets_key(K, flat[i]))
    table.sort(buckets)
    for _, b in ipairs(buckets) do
      use[#use + 1] = b
      use[#use + 1] = redis.call('ZCOUNT', constraint_held_key(K, b), '(' .. ms, '+inf')
      use[#use + 1] = redis.call('ZCARD', constraint_parked_key(K, b))
    end
  end
  out[#out + 1] = {flat[i], flat[i + 1], use}
end
return out
