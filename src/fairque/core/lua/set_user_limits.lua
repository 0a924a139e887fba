#!lua flags=allow-oom
--[[
set_user_limits: set a user's round-robin weight, in-flight cap, backlog quota and group
(each only when given), and re-evaluate its place in the ring at once (waking an idle
worker when the user comes back with work). Setting the same values again changes
nothing.

A user's group is kept in 'groups' and mirrored, with its weight, in its tenant hash
('group', 'weight'), where the lease path and the ring's joins read them; the first
user put in a group marks the queue 'grouped' (meta), and from then on a user in the
ring counts its weight in its group's 'active' (group_count). A change of weight or
group moves that count at once.

ARGV[1] user
ARGV[2] weight      turns per round (1 = default; stored only when > 1); '' unchanged
ARGV[3] cap         maximum tasks in flight (0 = unlimited), counted from unexpired
                    leases; '' unchanged
ARGV[4] max_queued  backlog quota: at most this many of its tasks in QUEUED, SCHEDULED or
                    DEFERRED (0 = the queue's default); '' unchanged
ARGV[5] '1': set the group to ARGV[6] ('' takes the user out of its group); '': unchanged
ARGV[6] group

Reply: 1.
]]
-- @include now
-- @include keys
-- @include has_ready
-- @include leave_ring
-- @include ring_join
-- @include signal_wake
-- @include group_count

local K = {prefix = KEYS[1], ring = KEYS[2], meta = KEYS[3], weights = KEYS[4], caps = KEYS[5],
  turns = KEYS[6], capped = KEYS[7], wake = KEYS[8], active = KEYS[9], quotas = KEYS[10],
  groups = KEYS[11]}
local user = ARGV[1]
-- a limit given ('' leaves it as it is) is stored when above `none`, else removed
local function set_limit(key, value, none)
  if value == '' then return end
  if tonumber(value) > none then
    redis.call('HSET', key, user, value)
  else
    redis.call('HDEL', key, user)
  end
end
set_limit(K.weights, ARGV[2], 1)
set_limit(K.caps, ARGV[3], 0)
set_limit(K.quotas, ARGV[4], 0)
local tk = tenant_key(K, user)
if ARGV[5] == '1' then
  if ARGV[6] == '' then
    redis.call('HDEL', K.groups, user)
    redis.call('HDEL', tk, 'group', 'weight')
  else
    redis.call('HSET', K.groups, user, ARGV[6])
    redis.call('HSET', tk, 'group', ARGV[6])
    redis.call('HSET', K.meta, 'grouped', '1')
  end
end
if redis.call('HEXISTS', tk, 'group') == 1 then
  local w = redis.call('HGET', K.weights, user)
  if w then redis.call('HSET', tk, 'weight', w) else redis.call('HDEL', tk, 'weight') end
  -- in the ring: counted in its group as it is now (its old count taken back)
  if redis.call('ZSCORE', K.ring, user) then group_count(K, user, true) end
elseif redis.call('HGET', K.meta, 'grouped') and redis.call('ZSCORE', K.ring, user) then
  group_count(K, user, false)  -- taken out of its group while in the ring
end
local cap = tonumber(ARGV[3] ~= '' and ARGV[3] or redis.call('HGET', K.caps, user) or '0')
local inflight = redis.call('ZCOUNT', held_key(K, user), '(' .. now(), '+inf')
-- either way the user starts a new round: its turns are forgotten
if cap > 0 and inflight >= cap then
  leave_ring(K, user)
  redis.call('SADD', K.capped, user)
else
  redis.call('HDEL', K.turns, user)
  redis.call('SREM', K.capped, user)
  if has_ready(K, user) then
    -- idle workers park until woken: wake one for a user let back in (not on a resend,
    -- which finds the user in the ring already)
    local outside = redis.call('ZSCORE', K.ring, user) == false
    ring_join(K, user)
    if outside then signal_wake(K, 1) end
  end
end
return 1
