#!lua flags=allow-oom
--[[
resize: place the queue's tenants on its first N shards from now on, while producers
and workers run. Shards past the list's end are added (their tags given); shards past N
are retired: no task is pushed to them any more, and workers drain what they hold.
Nothing moves: a tenant's tasks stay in the shard they were pushed to until they end.
A resize that saw a list other than the one the server holds (another resize came
first) changes nothing and answers the layout as it is; so does a resend whose first
run appended tags.

ARGV[1] count   N, the shards tenants are placed on from now on (1..M after the append)
ARGV[2] seen    how many tags the caller's list held
ARGV[3..]       tags to append (shards M..N-1 when the queue grows past its list)

Reply: {N, the tags of shards 1..M-1} as the queue has them now. Errors: 'FQERR -33'
(ValidationError) when N is past the list and its tags were not given.
]]

local K = {prefix = KEYS[1], shards = KEYS[2], meta = KEYS[3]}
local count, seen = tonumber(ARGV[1]), tonumber(ARGV[2])
local have = redis.call('LRANGE', K.shards, 0, -1)
if #have == seen then
  for i = 3, #ARGV do
    have[#have + 1] = ARGV[i]
  end
  if count > #have + 1 then
    return redis.error_reply('FQERR -33 resize to ' .. count .. ' shards needs their tags')
  end
  if #ARGV > 2 then redis.call('RPUSH', K.shards, unpack(ARGV, 3)) end
  redis.call('HSET', K.meta, 'shards', count)
end
local now = tonumber(redis.call('HGET', K.meta, 'shards') or (#have + 1))
return {now, unpack(have)}
