#!lua flags=allow-oom
--[[
complete: finish a leased task, fenced by its lease token, and release the
dependents that were waiting only for it.

KEYS[1] prefix    fq:{<queue>}:  per-task and per-user keys derive from it (includes/keys.lua)
KEYS[2] ring      users with ready work, by last-served virtual time
KEYS[3] delayed   SCHEDULED registry: task id -> due time
KEYS[4] leases    STARTED registry: task id -> lease deadline
KEYS[5] queued    QUEUED registry: task id -> enqueue time
KEYS[6] deferred  DEFERRED registry: task id -> push time
KEYS[7] finished  FINISHED registry: task id -> expiry time
KEYS[8] meta      queue counters: ring clock, lease sequence, push clock
KEYS[9] stats     throughput counters
KEYS[10] caps     user -> in-flight cap
KEYS[11] capped   users held out of the ring by their in-flight cap
KEYS[12] wake     wake-up list (signalled when dependents become ready)
KEYS[13] ends     ended tasks to unindex at expiry: '<user>\n<name>\n<id>' -> expiry
KEYS[14] constraint_due  constraint buckets with parked tasks -> when their limit frees

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
-- @include count_completions
-- @include signal_wake

local K = {prefix = KEYS[1], ring = KEYS[2], delayed = KEYS[3], leases = KEYS[4],
  queued = KEYS[5], deferred = KEYS[6], finished = KEYS[7], meta = KEYS[8], stats = KEYS[9],
  caps = KEYS[10], capped = KEYS[11], wake = KEYS[12], ends = KEYS[13], constraint_due = KEYS[14]}
local ms, us = now()
local acc = {runs = {}, done = 0}
local ok, ready = complete_task(K, ARGV[1], ARGV[2], ARGV[3] == '1', ARGV[4], ms, us,
  ARGV[5], ARGV[6] + 0, acc, ARGV[7])  -- (+ 0: Lua's string coercion, a third of a tonumber call)
count_completions(K, acc)
if ready > 0 then
  signal_wake(K, 1)
end
return ok
