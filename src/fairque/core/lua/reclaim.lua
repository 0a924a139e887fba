#!lua flags=allow-oom
--[[
reclaim: treat expired leases as failed attempts (retry with backoff or FAILED).
pop does this too, bounded, on every call; this script is the explicit form.

KEYS[1] prefix    fq:{<queue>}:  per-task and per-user keys derive from it (includes/keys.lua)
KEYS[2] ring      users with ready work, by last-served virtual time
KEYS[3] delayed   SCHEDULED registry: task id -> due time
KEYS[4] leases    STARTED registry: task id -> lease deadline
KEYS[5] deferred  DEFERRED registry: task id -> push time
KEYS[6] failed    FAILED registry: task id -> expiry time
KEYS[7] canceled  CANCELED registry: task id -> expiry time
KEYS[8] meta      queue counters: ring clock, lease sequence, push clock
KEYS[9] stats     throughput counters
KEYS[10] caps     user -> in-flight cap
KEYS[11] capped   users held out of the ring by their in-flight cap
KEYS[12] wake     wake-up list (reclaimed leases scheduled for retry)
KEYS[13] ends     ended tasks to unindex at expiry: '<user>\n<name>\n<id>' -> expiry
KEYS[14] constraint_due  constraint buckets with parked tasks -> when their limit frees
KEYS[15] backlog  user -> its tasks in QUEUED, SCHEDULED or DEFERRED

ARGV[1] limit       at most this many leases
ARGV[2] base_ms     retry backoff base
ARGV[3] failed_ttl_ms

Reply: the number of leases reclaimed.
]]
-- @include now
-- @include reclaim_expired

local K = {prefix = KEYS[1], ring = KEYS[2], delayed = KEYS[3], leases = KEYS[4],
  deferred = KEYS[5], failed = KEYS[6], canceled = KEYS[7], meta = KEYS[8], stats = KEYS[9],
  caps = KEYS[10], capped = KEYS[11], wake = KEYS[12], ends = KEYS[13],
  constraint_due = KEYS[14], backlog = KEYS[15]}
return reclaim_expired(K, now(), tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]))
