#!lua flags=allow-oom
--[[
complete_and_pop: a worker's usual round trip in one call: finish the tasks it has
completed (each fenced by its lease token, exactly as complete.lua) and lease its
next tasks (exactly as pop.lua, maintenance included). A resend of the same request
(same `req`) answers the completions the same way and returns the tasks the first
run leased, changing nothing.

ARGV[1] count       tasks to lease (0: only complete)
ARGV[2] worker_id   recorded on the lease (the task hash's 'worker')
ARGV[3] lease_ms
ARGV[4] base_ms
ARGV[5] failed_ttl_ms
ARGV[6] batch       maintenance bound
ARGV[7] ordering    'aging' | 'strict'
ARGV[8] horizon_us
ARGV[9] req         request id (unique per call; the same when a call is resent)
ARGV[10] A          number of assigned_users, then their A user ids, then the number S of
                    steal_targets and their S user ids, then the number N of task names
                    the worker handles (0: any) and the N names, then the most leases
                    the worker may hold at once ('': no bound) (ARGV[1..13+A+S+N] is
                    pop.lua's ARGV)
ARGV[14+A+S+N] C    number of completions, then 5 values each:
                    id, token, has_result (0|1), result, run_us (the handler's run as
                    the worker measured it; '': not reported)
ARGV[15+A+S+N+5C]  '1': add this shard's state after the lease to the reply (the
                    sharded client weighs it for its next lease); absent otherwise

Reply: {array of 1/0 per completion (0: lease lost), array of leased tasks (flat HGETALL)},
and with the state asked for, a third entry: shard_state.lua's reply.
]]
-- @include now
-- @include enqueue_ready
-- @include complete_task
-- @include write_later
-- @include signal_wake
-- @include read_users
-- @include read_names
-- @include lease_request
-- @include maintenance

local K = {prefix = KEYS[1], ring = KEYS[2], delayed = KEYS[3], leases = KEYS[4],
  queued = KEYS[5], deferred = KEYS[6], finished = KEYS[7], failed = KEYS[8],
  canceled = KEYS[9], meta = KEYS[10], stats = KEYS[11], weights = KEYS[12],
  caps = KEYS[13], turns = KEYS[14], capped = KEYS[15], wake = KEYS[16], ends = KEYS[17],
  constraint_due = KEYS[18], constraints = KEYS[19], active = KEYS[20], intake = KEYS[21],
  backlog = KEYS[22], aside = KEYS[23]}
local req = ARGV[9]
local ms, us = now()
-- numeric ARGV read as ARGV[i] + 0: Lua's string coercion costs a third of a tonumber call
local ordering, horizon_us = ARGV[7], ARGV[8] + 0
local assigned, steal, any, at = read_users(ARGV, 10)
local names
names, at = read_names(ARGV, at)
local most = tonumber(ARGV[at])
at = at + 1
local nc = ARGV[at] + 0
local acks, ready = {}, 0
local acc = {}
if nc > 1 then acc.later = {leases = {}, ends = {}, registry = {}} end
for i = 0, nc - 1 do
  local b = at + 1 + i * 5
  local ok, made_ready = complete_task(K, ARGV[b], ARGV[b + 1], ARGV[b + 2] == '1',
    ARGV[b + 3], ms, us, ordering, horizon_us, acc, ARGV[b + 4])
  acks[#acks + 1] = ok
  ready = ready + made_ready
end
write_later(K, acc.later)
local count = ARGV[1] + 0
local leased = {}
if count > 0 then
  -- one EXISTS answers the usual call: not a resend, on a queue without constraints,
  -- weights, caps or tasks set aside (past the resend check, a key found is one of those)
  local limits = redis.call('EXISTS', fetch_key(K, req), K.constraints, K.weights, K.caps,
    K.aside) > 0
  local again = false
  if limits then
    -- (included here: a script makes every function it defines on each run)
-- @include leased_before
    again = leased_before(K, req)
  end
  if again then
    leased = again
  else
    -- the queue's counters, read once for the upkeep's 'due' hint and the lease (again
    -- when the upkeep moved something)
    local fm = redis.call('HMGET', K.meta, 'fair', 'floor', 'lease', 'clock', 'due',
      'costly', 'counted',
      'weights', 'group_caps', 'group_backlogs')
    if maintenance(K, ms, ARGV[6] + 0, ARGV[4] + 0, ARGV[5] + 0, ordering, horizon_us,
        fm[5]) then
      fm = nil
    end
    leased = lease_request(K, req, count, ARGV[2], ARGV[3] + 0, ms, assigned, steal,
      any, limits, us, names, fm, most)
  end
end
if ready > #leased then
  signal_wake(K, 1)
end
if ARGV[at + 1 + nc * 5] == '1' then
-- @include shard_state
  return {acks, leased, shard_state(K, ms)}
end
return {acks, leased}
