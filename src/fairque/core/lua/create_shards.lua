--[[
create_shards: make a new queue a sharded queue, or read the shards a queue has. The
shard list is kept in shard 0 (the queue's own tag): the tags of shards 1..N-1, in
order. A queue that already holds anything (its counters or its queue state exist)
and has no list has one shard, and stays so: splitting it is a resize. A resend, or a
second creator racing this one, gets the list the first one wrote.

KEYS[1] prefix  fq:{<queue>}:  per-task and per-user keys derive from it (includes/keys.lua)
KEYS[2] shards  the tags of shards 1..N-1 (absent: one shard)
KEYS[3] meta    queue counters (exists once the queue was used)
KEYS[4] stats   throughput counters (exists once anything was pushed)

ARGV[1..]       the tags of shards 1..N-1 to create (none: only read)

Reply: the tags of shards 1..N-1 the queue has now (empty: one shard).
]]

local K = {prefix = KEYS[1], shards = KEYS[2], meta = KEYS[3], stats = KEYS[4]}
local have = redis.call('LRANGE', K.shards, 0, -1)
if #have > 0 or #ARGV == 0 then return have end
if redis.call('EXISTS', K.meta, K.stats) > 0 then return {} end
redis.call('RPUSH', K.shards, unpack(ARGV))
return ARGV
