#!lua flags=allow-oom
--[[
next_wakeup: how long until the queue needs attention without a push: the earliest
SCHEDULED task becomes due, the earliest lease expires or a constraint's limit frees
for tasks parked over it; now while the intake holds tasks (a lease call places them). Idle workers use it to
bound their blocking wait.

Reply: microseconds from now (0 when already due), or -1 when nothing is pending (a
       constraint's due time is kept to the microsecond; the others are whole ms).
]]
-- @include now

local K = {prefix = KEYS[1], delayed = KEYS[2], leases = KEYS[3],
  constraint_due = KEYS[4], intake = KEYS[5]}
if redis.call('LLEN', K.intake) > 0 then return 0 end  -- the next lease call places them
local _, us = now()
local best = -1
for _, registry in ipairs({K.delayed, K.leases, K.constraint_due}) do
  local head = redis.call('ZRANGE', registry, 0, 0, 'WITHSCORES')
  if head[2] then
    local wait = math.max(0, math.floor(tonumber(head[2]) * 1000 - us))
    if best < 0 or wait < best then best = wait end
  end
end
return best
