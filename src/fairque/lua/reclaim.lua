--[[
reclaim: treat expired leases as failed attempts (retry with backoff or FAILED).
pop does this too, bounded, on every call; this script is the explicit form.

KEYS[1] prefix      fq:{<queue>}:
KEYS[2] leases      STARTED registry
KEYS[3] delayed     SCHEDULED registry
KEYS[4] failed      FAILED registry
KEYS[5] stats
KEYS[6] capped      users held out of the ring by their in-flight cap
KEYS[7] wake        wake-up list

ARGV[1] limit       at most this many leases
ARGV[2] base_ms     retry backoff base
ARGV[3] failed_ttl_ms

Reply: the number of leases reclaimed.
]]
-- @include now
-- @include reclaim_expired

return reclaim_expired(KEYS[1], now(), tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]))
