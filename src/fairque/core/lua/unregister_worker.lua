#!lua flags=allow-oom
--[[
unregister_worker: a worker stops and removes its registration.

ARGV[1] id

Reply: 1 when the worker was registered, else 0.
]]

local K = {prefix = KEYS[1], workers = KEYS[2], workers_seen = KEYS[3]}
redis.call('ZREM', K.workers_seen, ARGV[1])
return redis.call('HDEL', K.workers, ARGV[1])
