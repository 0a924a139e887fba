--[[
pop: lease up to `count` ready tasks, serving users round robin.

Before selecting, the same call reclaims up to `batch` expired leases and promotes up
to `batch` due SCHEDULED tasks, so no separate maintenance process is required.
User choice: the least recently served of `assigned` users that have ready work;
when none has, the least recently served of `steal` targets ('*' = any user). With
neither list the whole ring is served.  A served user moves to the ring's tail
(after `weight` consecutive turns for a weighted user); a user reaching its
in-flight cap leaves the ring until a slot frees.

KEYS[1] prefix      fq:{<queue>}:
KEYS[2] ring
KEYS[3] leases      STARTED registry
KEYS[4] delayed     SCHEDULED registry
KEYS[5] queued      QUEUED registry
KEYS[6] meta
KEYS[7] stats
KEYS[8] inflight

ARGV[1] count       tasks to lease (>= 1)
ARGV[2] worker      worker id recorded on the lease
ARGV[3] lease_ms    lease length
ARGV[4] base_ms     retry backoff base (for reclaimed leases)
ARGV[5] failed_ttl_ms
ARGV[6] batch       maintenance bound (reclaim / promote per call)
ARGV[7] ordering    'aging' | 'strict'
ARGV[8] horizon_us
ARGV[9] A           number of assigned users, then A user ids
ARGV[10+A] S        number of steal targets, then S user ids

Reply: array of leased tasks, each the flat HGETALL of its hash.
]]
-- @include now
-- @include has_ready
-- @include reclaim_expired
-- @include promote_due

local prefix = KEYS[1]
local ring = KEYS[2]
local count, worker, lease_ms = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local base_ms, failed_ttl_ms, batch = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local ordering, horizon_us = ARGV[7], tonumber(ARGV[8])
local na = tonumber(ARGV[9])
local assigned = {}
for i = 1, na do assigned[i] = ARGV[9 + i] end
local ns = tonumber(ARGV[10 + na])
local steal, any = {}, false
for i = 1, ns do
  local u = ARGV[10 + na + i]
  if u == '*' then any = true else steal[#steal + 1] = u end
end

local ms = now()
reclaim_expired(prefix, ms, batch, base_ms, failed_ttl_ms)
promote_due(prefix, ms, batch, ordering, horizon_us)

local function least_served(users)
  if #users == 0 then return nil end
  local scores = redis.call('ZMSCORE', ring, unpack(users))
  local best, best_score = nil, nil
  for i = 1, #users do
    local s = scores[i]
    if s then
      s = tonumber(s)
      if not best_score or s < best_score then best, best_score = users[i], s end
    end
  end
  return best
end

local function pick()
  if na > 0 then
    local u = least_served(assigned)
    if u or ns == 0 then return u end
  end
  if any or ns == 0 then
    return redis.call('ZRANGE', ring, 0, 0)[1]
  end
  return least_served(steal)
end

local out = {}
local guard = 0
while #out < count and guard < count + 64 do
  guard = guard + 1
  local user = pick()
  if not user then break end
  local id = redis.call('LPOP', prefix .. 'crit:' .. user)
  if not id then id = redis.call('ZPOPMIN', prefix .. 'norm:' .. user)[1] end
  if not id then
    redis.call('ZREM', ring, user)
    redis.call('HDEL', prefix .. 'turns', user)
  else
    if not has_ready(prefix, user) then
      redis.call('ZREM', ring, user)
      redis.call('HDEL', prefix .. 'turns', user)
    else
      local rotate = true
      local w = tonumber(redis.call('HGET', prefix .. 'weights', user) or '1')
      if w > 1 then
        if redis.call('HINCRBY', prefix .. 'turns', user, 1) < w then
          rotate = false
        else
          redis.call('HDEL', prefix .. 'turns', user)
        end
      end
      if rotate then
        redis.call('ZADD', ring, redis.call('HINCRBY', prefix .. 'meta', 'clock', 1), user)
      end
    end
    local inflight = redis.call('HINCRBY', prefix .. 'inflight', user, 1)
    local cap = tonumber(redis.call('HGET', prefix .. 'caps', user) or '0')
    if cap > 0 and inflight >= cap then
      redis.call('ZREM', ring, user)
      redis.call('HDEL', prefix .. 'turns', user)
      redis.call('SADD', prefix .. 'capped', user)
    end
    local token = redis.call('HINCRBY', prefix .. 'meta', 'lease', 1)
    local deadline = ms + lease_ms
    local tk = prefix .. 'task:' .. id
    redis.call('HSET', tk, 'state', 'STARTED', 'lease', token, 'worker', worker,
      'deadline', deadline, 'started', ms)
    redis.call('ZREM', prefix .. 'queued', id)
    redis.call('ZADD', prefix .. 'leases', deadline, id)
    out[#out + 1] = redis.call('HGETALL', tk)
  end
end
if #out > 0 then redis.call('HINCRBY', prefix .. 'stats', 'popped', #out) end
return out
