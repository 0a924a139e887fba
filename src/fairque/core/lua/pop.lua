#!lua flags=allow-oom
--[[
pop: lease up to `count` ready tasks, serving users round robin.

Before selecting, the same call reclaims up to `batch` expired leases and promotes up
to `batch` due SCHEDULED tasks, so no separate maintenance process is required.
Selection rules: see includes/lease_tasks.lua. A resend of the same request (same
`req`) returns the tasks the first run leased and changes nothing.

ARGV[1] count       tasks to lease (>= 1)
ARGV[2] worker_id   recorded on the lease (the task hash's 'worker')
ARGV[3] lease_ms    lease length
ARGV[4] base_ms     retry backoff base (for reclaimed leases)
ARGV[5] failed_ttl_ms
ARGV[6] batch       maintenance bound (reclaim / promote per call)
ARGV[7] ordering    'aging' | 'strict'
ARGV[8] horizon_us
ARGV[9] req         request id (unique per call; the same when a call is resent)
ARGV[10] A          number of assigned_users, then their A user ids
ARGV[11+A] S        number of steal_targets, then their S user ids ('*' = any user)
ARGV[12+A+S] N      number of task names the worker handles (0: any), then the N names
ARGV[13+A+S+N] most the most leases the worker may hold at once ('' or absent: no bound;
                    lease_request)

Reply: array of leased tasks, each the flat HGETALL of its hash.
]]
-- @include now
-- @include keys
-- @include read_users
-- @include read_names
-- @include lease_request
-- @include maintenance

local K = {prefix = KEYS[1], ring = KEYS[2], delayed = KEYS[3], leases = KEYS[4],
  queued = KEYS[5], deferred = KEYS[6], failed = KEYS[7], canceled = KEYS[8],
  meta = KEYS[9], stats = KEYS[10], weights = KEYS[11], caps = KEYS[12], turns = KEYS[13],
  capped = KEYS[14], wake = KEYS[15], ends = KEYS[16], constraint_due = KEYS[17],
  constraints = KEYS[18], active = KEYS[19], intake = KEYS[20], backlog = KEYS[21],
  aside = KEYS[22]}
local req = ARGV[9]
-- one EXISTS answers the usual call: not a resend, on a queue without constraints,
-- weights, caps or tasks set aside (past the resend check, a key found is one of those)
local limits = redis.call('EXISTS', fetch_key(K, req), K.constraints, K.weights, K.caps,
  K.aside) > 0
if limits then
-- @include leased_before
  local again = leased_before(K, req)
  if again then return again end
end
local ms, us = now()
-- numeric ARGV read as ARGV[i] + 0: Lua's string coercion costs a third of a tonumber call
-- the queue's counters, read once for the upkeep's 'due' hint and the lease (again when
-- the upkeep moved something)
local fm = redis.call('HMGET', K.meta, 'fair', 'floor', 'lease', 'clock', 'due',
  'costly', 'counted',
  'weights', 'group_caps', 'group_backlogs')
if maintenance(K, ms, ARGV[6] + 0, ARGV[4] + 0, ARGV[5] + 0, ARGV[7], ARGV[8] + 0, fm[5]) then
  fm = nil
end
local assigned, steal, any, at = read_users(ARGV, 10)
local names, past = read_names(ARGV, at)
local most = tonumber(ARGV[past] or '')
return lease_request(K, req, ARGV[1] + 0, ARGV[2], ARGV[3] + 0, ms, assigned,
  steal, any, limits, us, names, fm, most)
