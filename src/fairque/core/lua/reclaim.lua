#!lua flags=allow-oom
--[[
reclaim: treat expired leases as failed attempts (retry with backoff or FAILED).
pop does this too, bounded, on every call; this script is the explicit form, and it
also brings users more than the lead bound ahead of the floor back to it (bound_lead:
a batch of reclaimed leases costs their tenant a bounded wait).

ARGV[1] limit       at most this many leases
ARGV[2] base_ms     retry backoff base
ARGV[3] failed_ttl_ms

Reply: the number of leases reclaimed.
]]
-- @include now
-- @include reclaim_expired
-- @include bound_lead

local K = {prefix = KEYS[1], ring = KEYS[2], delayed = KEYS[3], leases = KEYS[4],
  deferred = KEYS[5], failed = KEYS[6], canceled = KEYS[7], meta = KEYS[8], stats = KEYS[9],
  caps = KEYS[10], capped = KEYS[11], wake = KEYS[12], ends = KEYS[13],
  constraint_due = KEYS[14], backlog = KEYS[15]}
local n = reclaim_expired(K, now(), tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]))
bound_lead(K, tonumber(ARGV[1]))
return n
