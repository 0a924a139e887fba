--[[
unregister_worker: a worker stops and removes its registration.

KEYS[1] prefix        fq:{<queue>}:
KEYS[2] workers
KEYS[3] workers_seen

ARGV[1] id

Reply: 1 when the worker was registered, else 0.
]]

redis.call('ZREM', KEYS[3], ARGV[1])
return redis.call('HDEL', KEYS[2], ARGV[1])
