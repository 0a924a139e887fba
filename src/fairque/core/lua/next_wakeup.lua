#!lua flags=allow-oom
--[[
next_wakeup: how long until the queue needs attention without a push: the earliest
SCHEDULED task becomes due, the earliest lease expires or a constraint's limit frees
for tasks parked over it; now while the intake holds tasks (a lease call places them). Idle workers use it to
bound their blocking wait.

KEYS[1] prefix   fq:{<queue>}:  per-task and per-user keys derive from it (includes/keys.lua)
KEYS[2] delayed  SCHEDULED registry: task id -> due time
KEYS[3] leases   STARTED registry: task id -> lease deadline
KEYS[4] constraint_due  constraint buckets with parked tasks -> when their limit frees
KEYS[5] intake   plain tasks pushed one at a time, not yet placed (due now)

Reply: milliseconds from now (0 when already due), or -1 when nothing is pending.
]]
-- @include now

local K = {prefix = KEYS[1], delayed = KEYS[2], leases = KEYS[3],
  constraint_due = KEYS[4], intake = KEYS[5]}
if redis.call('LLEN', K.intake) > 0 then return 0 end  -- the next lease call places them
local ms = now()
local best = -1
for _, registry in ipairs({K.delayed, K.leases, K.constraint_due}) do
  local head = redis.call('ZRANGE', registry, 0, 0, 'WITHSCORES')
  if head[2] then
    local wait = math.max(0, tonumber(head[2]) - ms)
    if best < 0 or wait < best then best = wait end
  end
end
return best
