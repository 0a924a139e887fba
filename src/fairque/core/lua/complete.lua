#!lua flags=allow-oom
--[[
complete: finish a leased task, fenced by its lease token, and release the
dependents that were waiting only for it.

ARGV[1] id
ARGV[2] token       lease token given by pop
ARGV[3] has_result  0 | 1
ARGV[4] result      serialized result (ignored unless has_result and keep_result)
ARGV[5] ordering    'aging' | 'strict' (for released dependents)
ARGV[6] horizon_us
ARGV[7] run_us      the handler's run as the worker measured it ('': not reported)

Reply: 1 when this call finished the task, or when it is a resend of a completion
that did (nothing changes then); 0 when the lease was lost (expired, reclaimed,
canceled or finished by someone else); nothing changes then.
]]
-- @include now
-- @include complete_task
-- @include signal_wake

local K = {prefix = KEYS[1], ring = KEYS[2], delayed = KEYS[3], leases = KEYS[4],
  queued = KEYS[5], deferred = KEYS[6], finished = KEYS[7], meta = KEYS[8], stats = KEYS[9],
  caps = KEYS[10], capped = KEYS[11], wake = KEYS[12], ends = KEYS[13], constraint_due = KEYS[14],
  backlog = KEYS[15]}
local ms, us = now()
local acc = {}
local ok, ready = complete_task(K, ARGV[1], ARGV[2], ARGV[3] == '1', ARGV[4], ms, us,
  ARGV[5], ARGV[6] + 0, acc, ARGV[7])  -- (+ 0: Lua's string coercion, a third of a tonumber call)
if ready > 0 then
  signal_wake(K, 1)
end
return ok
