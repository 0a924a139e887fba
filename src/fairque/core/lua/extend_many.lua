#!lua flags=allow-oom
--[[
extend_many: heartbeat for many leases at once: push each held lease's deadline to
now + ms. Leases no longer held, or whose deadline has passed (see extend.lua), are
reported, not touched.

ARGV[1] ms          new lease length from now
ARGV[2..]           quadruples: id, token, run_us (the handler's run so far as the worker
                    measured it; '': not reported), progress ('<fraction>\n<message>'
                    as the handler reported it, kept as the task's 'progress' and
                    'progress_msg'; '': none new)

Reply: one entry per lease: the new deadline (ms since the epoch), or -1 when that
lease was lost.
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
local ms = now()
local deadline = ms + tonumber(ARGV[1])
local out, moved, lost, shorter = {}, {}, 0, false
for i = 2, #ARGV, 4 do
  local id = ARGV[i]
  local held, f = lease_fence(K, id, ARGV[i + 1], 'user', 'deadline', 'cons', 'started',
    'fair', 'cost', 'gheld')
  if held and tonumber(f[4]) > ms then
    local fair = fair_heartbeat(K, f[3], ms - (f[6] or ms), f[7], ARGV[i + 2])
    local fields = {'deadline', deadline}
    if fair then fields[3], fields[4] = 'fair', fair end
    redis.call('HSET', task_key(K, id), unpack(progress_fields(fields, ARGV[i + 3])))
    extend_slots(K, id, f[3], deadline, f[5], f[8], f[9])
    if deadline < tonumber(f[4]) then shorter = true end
    moved[#moved + 1] = deadline
    moved[#moved + 1] = id
    out[#out + 1] = deadline
  else
    lost = lost + 1
    out[#out + 1] = -1
  end
end
-- the lease registry and the counter once for the call, in slices the Lua stack takes
for at = 1, #moved, 2000 do
  redis.call('ZADD', K.leases, unpack(moved, at, math.min(#moved, at + 1999)))
end
-- a shorter extension than a lease had may end before the queue's 'due' hint
if shorter then due_by(K, deadline) end
if lost > 0 then redis.call('HINCRBY', K.stats, 'lease_lost', lost) end
return out
