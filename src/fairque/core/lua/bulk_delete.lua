#!lua flags=allow-oom
--[[
bulk_delete: delete each of the given FAILED (or CANCELED, or FINISHED) tasks now, as
their expiry would later (an operator's bulk purge of dead letters, or of finished
records to make room): out of their registry, their
user's and name's indexes and the expiry list, their data deleted. Each leaves a
tombstone for the replay window ('gone:<id>', as finalize's), so a resent push of the
id is still answered as the ended task, and a resend of this call answers the same.
Dependents still waiting for one (policy 'wait') are canceled by cleanup_dependencies,
as for an upstream that expired. A task in another state, or gone, is left as it is.

ARGV[1] req         request id (unique per call; the same when a call is resent)
ARGV[2] state       'FAILED' | 'CANCELED' | 'FINISHED': the state a task must be in to
                    be deleted
ARGV[3..]           task ids

Reply: how many were deleted by this request.
]]
-- @include keys
-- @include replayed
-- @include last_op
-- @include unindex_task
-- @include bytes_add

local K = {prefix = KEYS[1], failed = KEYS[2], canceled = KEYS[3], ends = KEYS[4],
  finished = KEYS[5], backlog = KEYS[6]}
local req, state = ARGV[1], ARGV[2]
local registry = ({FAILED = K.failed, CANCELED = K.canceled, FINISHED = K.finished})[state]
local done = 0
for i = 3, #ARGV do
  local id = ARGV[i]
  local tk = task_key(K, id)
  local f = redis.call('HMGET', tk, 'state', 'user', 'name', 'op')
  if replayed(last_op(K, id, f[1], f[4]), req) then
    done = done + 1
  elseif f[1] == state then
    redis.call('ZREM', registry, id)
    redis.call('ZREM', K.ends, f[2] .. '\n' .. f[3] .. '\n' .. id)
    unindex_task(K, id, f[2], f[3])
    local kept = redis.call('HGET', kept_key(K, f[2]), id)  -- its bytes go with it
    if kept then
      bytes_add(K, f[2], -kept)
      redis.call('HDEL', kept_key(K, f[2]), id)
    end
    redis.call('DEL', tk, watch_key(K, id), done_key(K, id))
    redis.call('SET', gone_key(K, id), state .. ' ' .. req .. ' DELETED', 'PX', 60000)
    done = done + 1
  end
end
return done
