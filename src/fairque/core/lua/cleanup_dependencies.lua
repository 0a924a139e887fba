#!lua flags=allow-oom
--[[
cleanup_dependencies: repair dependency data left behind by expired tasks. Looks at up to
`limit` DEFERRED tasks from `offset`: an upstream whose data has expired can never
finish, so it is dropped from the waiting set and the dependent is CANCELED (with
its own dependents, as for a failure). Blocked sets of expired upstreams are
deleted. Safe to run at any time; call again with the returned offset until it is 0.

ARGV[1] offset      position in the DEFERRED registry to start at
ARGV[2] limit       tasks to examine
ARGV[3] ttl_ms      how long a canceled task stays readable

Reply: {tasks examined, tasks canceled (cascades included), next offset (0 when done)}.
]]
-- @include now
-- @include keys
-- @include detach_waiting
-- @include finalize
-- @include cascade_failure
-- @include backlog_add

local K = {prefix = KEYS[1], deferred = KEYS[2], canceled = KEYS[3], stats = KEYS[4],
  ends = KEYS[5], backlog = KEYS[6]}
local offset, limit, ttl_ms = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local ms = now()
local ids = redis.call('ZRANGE', K.deferred, offset, offset + limit - 1)
local canceled, direct = 0, 0
for _, id in ipairs(ids) do
  local tk = task_key(K, id)
  local gone = nil
  for _, up in ipairs(redis.call('SMEMBERS', deps_waiting_key(K, id))) do
    if redis.call('EXISTS', task_key(K, up)) == 0 then
      gone = gone or up
      redis.call('DEL', deps_blocked_key(K, up))
    end
  end
  if redis.call('EXISTS', tk) == 0 then
    detach_waiting(K, id)
    redis.call('ZREM', K.deferred, id)
    direct = direct + 1
  elseif gone then
    detach_waiting(K, id)
    redis.call('ZREM', K.deferred, id)
    backlog_add(K, redis.call('HGET', tk, 'user'), -1)
    redis.call('HSET', tk, 'error', 'dependency ' .. gone .. ' expired before finishing')
    finalize(K, id, 'CANCELED', K.canceled, ms, ttl_ms, 'canceled')
    canceled = canceled + cascade_failure(K, id, ms, ttl_ms)
    direct = direct + 1
  end
end
local next_offset = 0
if #ids == limit then next_offset = offset + limit - direct end
return {#ids, canceled + direct, next_offset}
