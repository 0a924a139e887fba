--[[
extend_many: heartbeat for many leases at once: push each held lease's deadline to
now + ms. Leases no longer held, or whose deadline has passed (see extend.lua), are
reported, not touched.

KEYS[1] prefix      fq:{<queue>}:
KEYS[2] leases      STARTED registry

ARGV[1] ms          new lease length from now
ARGV[2..]           pairs: id, token

Reply: one entry per pair: the new deadline (ms since the epoch), or -1 when that
lease was lost.
]]
-- @include now

local prefix = KEYS[1]
local ms = now()
local deadline = ms + tonumber(ARGV[1])
local out = {}
for i = 2, #ARGV, 2 do
  local id = ARGV[i]
  local tk = prefix .. 'task:' .. id
  local f = redis.call('HMGET', tk, 'state', 'lease', 'user', 'deadline')
  if f[1] == 'STARTED' and f[2] == ARGV[i + 1] and tonumber(f[4]) > ms then
    redis.call('HSET', tk, 'deadline', deadline)
    redis.call('ZADD', KEYS[2], deadline, id)
    redis.call('ZADD', prefix .. 'held:' .. f[3], deadline, id)
    out[#out + 1] = deadline
  else
    out[#out + 1] = -1
  end
end
return out
