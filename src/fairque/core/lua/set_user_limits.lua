#!lua flags=allow-oom
--[[
set_user_limits: set a user's round-robin weight, in-flight cap, backlog quota, group and
share (each only when given), and re-evaluate its place in the ring at once (waking an
idle worker when the user comes back with work). Setting the same values again changes
nothing.

A user's group is kept in 'groups', its share (floor and ceiling) in 'shares'; both are
mirrored in its tenant hash ('group', 'share'), with its weight ('weight'), where the
lease path and the ring's joins read them. The first group or share given makes the
queue's ring counted (meta 'counted'): every weight is mirrored and every user in the
ring counted (ring_count), and from then on the ring's joins and leaves keep the sums;
the last one taken away makes it plain again (each user in the ring's count taken back,
meta 'counted' and 'weights' gone). A
change of weight or group moves the user's count at once, and on a queue that keeps its
groups' backlogs (see set_group_limits), the user's backlog from its old group's to its
new group's.

ARGV[1] user
ARGV[2] weight      turns per round (1 = default; stored only when > 1); '' unchanged
ARGV[3] cap         maximum tasks in flight (0 = unlimited), counted from unexpired
                    leases; '' unchanged
ARGV[4] max_queued  backlog quota: at most this many of its tasks in QUEUED, SCHEDULED or
                    DEFERRED (0 = the queue's default); '' unchanged
ARGV[5] '1': set the group to ARGV[6] ('' takes the user out of its group); '': unchanged
ARGV[6] group
ARGV[7] floor       the least part of the worker time it holds while it has work (0: none);
                    '' unchanged
ARGV[8] ceiling     the most part of it while others wait (1: none); '' unchanged
ARGV[9] max_bytes   byte quota: at most this many payload bytes in its tasks that have
                    not ended (0 = the queue's default; quotas '<user>\0b'); '' or absent
                    unchanged

Reply: 1.
]]
-- @include now
-- @include keys
-- @include has_ready
-- @include leave_ring
-- @include ring_join
-- @include signal_wake
-- @include ring_count
-- @include share_set

local K = {prefix = KEYS[1], ring = KEYS[2], meta = KEYS[3], weights = KEYS[4], caps = KEYS[5],
  turns = KEYS[6], capped = KEYS[7], wake = KEYS[8], active = KEYS[9], quotas = KEYS[10],
  groups = KEYS[11], shares = KEYS[12], backlog = KEYS[13]}
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
if (ARGV[9] or '') ~= '' then
  if tonumber(ARGV[9]) > 0 then
    redis.call('HSET', K.quotas, user .. '\0b', ARGV[9])
  else
    redis.call('HDEL', K.quotas, user .. '\0b')
  end
end
local tk = tenant_key(K, user)
local counted = redis.call('HGET', K.meta, 'counted')
local function count_ring()  -- the first group or share: the ring is counted from now on
  if counted then return end
  counted = '1'
  redis.call('HSET', K.meta, 'counted', '1')
  local weights = redis.call('HGETALL', K.weights)
  for i = 1, #weights, 2 do
    redis.call('HSET', tenant_key(K, weights[i]), 'weight', weights[i + 1])
  end
  for _, u in ipairs(redis.call('ZRANGE', K.ring, 0, -1)) do ring_count(K, u, true) end
end
if ARGV[5] == '1' then
  local was = redis.call('HGET', K.groups, user)
  if ARGV[6] == '' then
    redis.call('HDEL', K.groups, user)
    redis.call('HDEL', tk, 'group')
  else
    count_ring()
    redis.call('HSET', K.groups, user, ARGV[6])
    redis.call('HSET', tk, 'group', ARGV[6])
  end
  -- on a queue that keeps its groups' backlogs, the user's backlog moves with it
  local b = was ~= ARGV[6] and redis.call('HEXISTS', K.backlog, '\0groups') == 1
    and redis.call('HGET', K.backlog, user)
  if b then
    if was then
      local gk = group_key(K, was)
      if redis.call('HINCRBY', gk, 'backlog', -b) <= 0 then redis.call('HDEL', gk, 'backlog') end
    end
    if ARGV[6] ~= '' then redis.call('HINCRBY', group_key(K, ARGV[6]), 'backlog', b) end
  end
end
if (ARGV[7] ~= '' or ARGV[8] ~= '') and share_set(K.shares, user, tk, ARGV[7], ARGV[8]) then
  count_ring()
end
-- the last group or share gone: the ring is plain again (what each member added is
-- taken back), so a lease stops weighing groups and shares
if counted and (ARGV[5] == '1' or ARGV[7] ~= '' or ARGV[8] ~= '')
    and redis.call('HLEN', K.groups) == 0 and redis.call('HLEN', K.shares) == 0 then
  for _, u in ipairs(redis.call('ZRANGE', K.ring, 0, -1)) do ring_count(K, u, false) end
  redis.call('HDEL', K.meta, 'counted', 'weights')
  counted = nil
end
if counted then
  local w = redis.call('HGET', K.weights, user)
  if w then redis.call('HSET', tk, 'weight', w) else redis.call('HDEL', tk, 'weight') end
  -- in the ring: counted as it is now (its old count taken back)
  if redis.call('ZSCORE', K.ring, user) then ring_count(K, user, true) end
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
