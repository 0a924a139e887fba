--[[
worker_beat: register a worker or refresh its heartbeat, and forget workers whose
last heartbeat is older than `ttl_ms` (they died without leaving).

KEYS[1] prefix        fq:{<queue>}:
KEYS[2] workers       hash id -> JSON description
KEYS[3] workers_seen  sorted set id -> last heartbeat (ms)

ARGV[1] id
ARGV[2] info          JSON description (host, pid, started, in_flight...)
ARGV[3] ttl_ms

Reply: the number of stale workers forgotten.
]]
-- @include now

local ms = now()
local stale = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', ms - tonumber(ARGV[3]))
for _, id in ipairs(stale) do
  redis.call('HDEL', KEYS[2], id)
  redis.call('ZREM', KEYS[3], id)
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[3], ms, ARGV[1])
return #stale
