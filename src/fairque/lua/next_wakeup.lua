--[[
next_wakeup: how long until the queue needs attention without a push: the earliest
SCHEDULED task becomes due or the earliest lease expires. Idle workers use it to
bound their blocking wait.

KEYS[1] prefix      fq:{<queue>}:
KEYS[2] delayed     SCHEDULED registry
KEYS[3] leases      STARTED registry

Reply: milliseconds from now (0 when already due), or -1 when nothing is pending.
]]
-- @include now

local ms = now()
local best = -1
for i = 2, 3 do
  local head = redis.call('ZRANGE', KEYS[i], 0, 0, 'WITHSCORES')
  if head[2] then
    local wait = math.max(0, tonumber(head[2]) - ms)
    if best < 0 or wait < best then best = wait end
  end
end
return best
