#!lua flags=allow-oom
--[[
register_worker: register a worker or refresh its heartbeat, and forget workers whose
registration has expired (they died without leaving). A resend refreshes again.

ARGV[1] id
ARGV[2] info          JSON description (host, pid, started, in_flight...)
ARGV[3] ttl_ms        the registration expires this long after the heartbeat

Reply: the number of expired workers forgotten.
]]
-- @include now
-- @include forget_workers

local K = {prefix = KEYS[1], workers = KEYS[2], workers_seen = KEYS[3]}
local ms = now()
local forgotten = forget_workers(K, ms, 100)
redis.call('HSET', K.workers, ARGV[1], ms .. ' ' .. ARGV[2])
redis.call('ZADD', K.workers_seen, ms + tonumber(ARGV[3]), ARGV[1])
return forgotten
