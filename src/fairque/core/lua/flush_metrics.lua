#!lua flags=allow-oom
--[[
flush_metrics: add one process's counts since its last flush to the queue's counters and
histograms (the stats hash) and to its tenants' (their tenant hashes). A process counts
what it leased, completed, failed and gave back (fairque.core.tally) and flushes at most
once a second; `seq` numbers its flushes, so a resend of one (same process, same seq)
adds nothing and answers 0. It runs at the memory limit too (a few fields and one small
key per process), so the counts keep up while workers drain a full server.

ARGV[1] process     the process's flush id (fairque.core.tally.Tally.process)
ARGV[2] seq         this flush's number (each flush of the process a higher one)
ARGV[3] Q           number of the queue's fields, then Q (field, increment) pairs
then, per tenant:   user, F (its number of fields), then F (field, increment) pairs

Reply: 1 when the counts were added, 0 for a resend of a flush that added them.
]]
-- @include keys

local K = {prefix = KEYS[1], stats = KEYS[2]}
local done = flushed_key(K, ARGV[1])
local seq = ARGV[2] + 0
local last = redis.call('GET', done)
if last and last + 0 >= seq then return 0 end
local function add(key, at, n)
  for i = at, at + 2 * n - 1, 2 do redis.call('HINCRBY', key, ARGV[i], ARGV[i + 1]) end
  return at + 2 * n
end
local at = add(K.stats, 4, ARGV[3] + 0)
while ARGV[at] do
  at = add(tenant_key(K, ARGV[at]), at + 2, ARGV[at + 1] + 0)
end
redis.call('SET', done, seq, 'PX', 86400000)
return 1
