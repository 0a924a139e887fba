#!lua flags=allow-oom
--[[
unregister_worker: a worker stops and removes its registration.

KEYS[1] prefix        fq:{<queue>}:  per-task and per-user keys derive from it (includes/keys.lua)
KEYS[2] workers       worker id -> '<last heartbeat ms> <JSON description>'
KEYS[3] workers_seen  worker id -> registration expiry (ms)

ARGV[1] id

Reply: 1 when the worker was registered, else 0.
]]

local K = {prefix = KEYS[1], workers = KEYS[2], workers_seen = KEYS[3]}
redis.call('ZREM', K.workers_seen, ARGV[1])
return redis.call('HDEL', K.workers, ARGV[1])
