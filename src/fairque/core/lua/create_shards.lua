#!lua flags=allow-oom
--[[
create_shards: make a new queue a sharded queue, or read the shards a queue has. The
layout is kept in shard 0 (the queue's own tag): the tags of shards 1..M-1 in order
(every shard that holds or held tasks), and meta 'shards', how many of them tenants
are placed on (the first N; the rest are retired by a resize and drained). A queue that
already holds anything (its counters or its queue state exist) and has no list has one
shard, and stays so here (a resize splits it). A resend, or a second creator racing
this one, gets the layout the first one wrote.

ARGV[1..]       the tags of shards 1..N-1 to create (none: only read)

Reply: {N, the tags of shards 1..M-1} (N = 1 and no tags: one shard).
]]

local K = {prefix = KEYS[1], shards = KEYS[2], meta = KEYS[3], stats = KEYS[4]}
local have = redis.call('LRANGE', K.shards, 0, -1)
if #have > 0 or #ARGV == 0 then
  local count = tonumber(redis.call('HGET', K.meta, 'shards') or (#have + 1))
  return {count, unpack(have)}
end
if redis.call('EXISTS', K.meta, K.stats) > 0 then return {1} end
redis.call('RPUSH', K.shards, unpack(ARGV))
redis.call('HSET', K.meta, 'shards', #ARGV + 1)
return {#ARGV + 1, unpack(ARGV)}
