#!lua flags=allow-oom
--[[
extend: push a held lease's deadline to now + ms (worker heartbeat).

ARGV[1] id
ARGV[2] token
ARGV[3] ms          new lease length from now
ARGV[4] run_us      the handler's run so far as the worker measured it ('': not reported)
ARGV[5] progress    '<fraction>\n<message>' as the handler reported it, kept as the
                    task's 'progress' and 'progress_msg' ('': none new)

Reply: the new deadline (ms since the epoch, server time). A resend moves it again,
       to now + ms: the same answer as a second heartbeat.
Errors: 'FQERR -7' (CancelRequested, a LeaseLost) when the task was canceled while
        this token held its lease (every resend answers the same);
        'FQERR -1' (LeaseLost) when the token does not hold the lease, or its
        deadline has passed (an expired lease no longer counts in flight, so the
        user's cap may have let another task start: it cannot be revived).
]]
-- @include now
-- @include keys
-- @include lease_fence
-- @include extend_slots
-- @include fair_heartbeat
-- @include due_by
-- @include progress_fields

local K = {prefix = KEYS[1], leases = KEYS[2], stats = KEYS[3], ring = KEYS[4],
  meta = KEYS[5]}
local id = ARGV[1]
local held, f = lease_fence(K, id, ARGV[2], 'user', 'deadline', 'cut_lease', 'cons', 'started',
  'fair', 'cost', 'gheld')
local ms = now()
if f[1] == 'CANCELED' and f[5] == ARGV[2] then
  return redis.error_reply('FQERR -7 task ' .. id .. ' was canceled')
end
if not held or tonumber(f[4]) <= ms then
  redis.call('HINCRBY', K.stats, 'lease_lost', 1)
  return redis.error_reply('FQERR -1 lease lost for task ' .. id)
end
local deadline = ms + tonumber(ARGV[3])
local fair = fair_heartbeat(K, f[3], ms - (f[7] or ms), f[8], ARGV[4])
local fields = {'deadline', deadline}
if fair then fields[3], fields[4] = 'fair', fair end
redis.call('HSET', task_key(K, id), unpack(progress_fields(fields, ARGV[5])))
redis.call('ZADD', K.leases, deadline, id)
-- a shorter extension than the lease had may end before the queue's 'due' hint
if deadline < tonumber(f[4]) then due_by(K, deadline) end
extend_slots(K, id, f[3], deadline, f[6], f[9], f[10])
return deadline
