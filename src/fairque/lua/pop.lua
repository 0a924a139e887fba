--[[
pop: lease up to `count` ready tasks, serving users round robin.

Before selecting, the same call reclaims up to `batch` expired leases and promotes up
to `batch` due SCHEDULED tasks, so no separate maintenance process is required.
Selection rules: see includes/lease_tasks.lua. A resend of the same request (same
`req`) returns the tasks the first run leased and changes nothing.

KEYS[1] prefix      fq:{<queue>}:
KEYS[2] ring
KEYS[3] leases      STARTED registry
KEYS[4] delayed     SCHEDULED registry
KEYS[5] queued      QUEUED registry
KEYS[6] meta
KEYS[7] stats
KEYS[8] capped      users held out of the ring by their in-flight cap
KEYS[9] wake        wake-up list (reclaimed leases scheduled for retry)

ARGV[1] count       tasks to lease (>= 1)
ARGV[2] worker      worker id recorded on the lease
ARGV[3] lease_ms    lease length
ARGV[4] base_ms     retry backoff base (for reclaimed leases)
ARGV[5] failed_ttl_ms
ARGV[6] batch       maintenance bound (reclaim / promote per call)
ARGV[7] ordering    'aging' | 'strict'
ARGV[8] horizon_us
ARGV[9] req         request id (unique per call; the same when a call is resent)
ARGV[10] A          number of assigned users, then A user ids
ARGV[11+A] S        number of steal targets, then S user ids ('*' = any user)

Reply: array of leased tasks, each the flat HGETALL of its hash.
]]
-- @include now
-- @include reclaim_expired
-- @include promote_due
-- @include read_users
-- @include leased_before
-- @include lease_request

local prefix, req = KEYS[1], ARGV[9]
local again = leased_before(prefix, req)
if again then return again end
local ms = now()
reclaim_expired(prefix, ms, tonumber(ARGV[6]), tonumber(ARGV[4]), tonumber(ARGV[5]))
promote_due(prefix, ms, tonumber(ARGV[6]), ARGV[7], tonumber(ARGV[8]))
local assigned, steal, any = read_users(ARGV, 10)
return lease_request(prefix, req, tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), ms, assigned,
  steal, any)
