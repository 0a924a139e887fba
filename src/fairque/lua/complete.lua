--[[
complete: finish a leased task, fenced by its lease token, and release the
dependents that were waiting only for it.

KEYS[1] prefix      fq:{<queue>}:
KEYS[2] leases      STARTED registry
KEYS[3] finished    FINISHED registry (scored by expiry)
KEYS[4] stats
KEYS[5] capped      users held out of the ring by their in-flight cap
KEYS[6] wake        wake-up list (signalled when dependents become ready)

ARGV[1] id
ARGV[2] token       lease token given by pop
ARGV[3] has_result  0 | 1
ARGV[4] result      serialized result (ignored unless has_result and keep_result)
ARGV[5] ordering    'aging' | 'strict' (for released dependents)
ARGV[6] horizon_us

Reply: 1 when this call finished the task, or when it is a resend of a completion
that did (nothing changes then); 0 when the lease was lost (expired, reclaimed,
canceled or finished by someone else); nothing changes then.
]]
-- @include now
-- @include complete_task
-- @include signal_wake

local ms, us = now()
local r = complete_task(KEYS[1], ARGV[1], ARGV[2], ARGV[3] == '1', ARGV[4], ms, us, ARGV[5],
  tonumber(ARGV[6]))
if r[2] > 0 then
  signal_wake(KEYS[1], 1)
end
return r[1]
