--[[
push_one: enqueue one plain task: no dependencies, delay, due time, timeout or
constraint buckets (the client sends anything else through push.lua). The fast path of
a push: a new task is written with one HSET, its indexes, its lane and the ring, and no
tables are built; it leaves the keyspace exactly as push.lua does for the same task.

A push of an id that exists (or ended within the last minute: its tombstone, see
finalize) is a no-op that returns the stored task, so a resent push never writes a
task twice.

KEYS[1] prefix    fq:{<queue>}:  per-task and per-user keys derive from it (includes/keys.lua)
KEYS[2] ring      users with ready work, by last-served virtual time
KEYS[3] queued    QUEUED registry: task id -> enqueue time
KEYS[4] meta      queue counters: ring clock, lease sequence, push clock
KEYS[5] stats     throughput counters
KEYS[6] capped    users held out of the ring by their in-flight cap
KEYS[7] wake      wake-up list idle workers block on
KEYS[8] constraints  constraint id -> definition; '~version': the constraints version

ARGV[1] ordering    'aging' | 'strict'
ARGV[2] horizon_us  aging horizon in microseconds
ARGV[3] on_dup      'return' (existing task is a no-op) | 'error' (DuplicateTask, except
                    for a resend of the push that created it)
ARGV[4] req         request id (unique per call; the same when a call is resent), kept
                    in the task's 'pushed' field
ARGV[5] cver        the constraints version the client matched the task against
ARGV[6] id, ARGV[7] user, ARGV[8] name, ARGV[9] payload, ARGV[10] prio (1..6),
ARGV[11] max_retries, ARGV[12] keep_result (0|1), ARGV[13] result_ttl_ms

Reply: one entry, as push.lua's: {0, 'QUEUED', created_ms} for a new task, {1, <HGETALL
       of the existing task>, mine} for an id that exists, {2, state} for a tombstone.
Errors: 'FQERR -32' (StaleConstraints) when the queue's constraints changed since the
        client read them; 'FQERR -3 <id>' (DuplicateTask) when on_dup is 'error'.
        Nothing is written then.
]]
-- @include now
-- @include keys
-- @include lane_score
-- @include signal_wake
-- @include stored_entry
-- @include fair_join_tag

local K = {prefix = KEYS[1], ring = KEYS[2], queued = KEYS[3], meta = KEYS[4],
  stats = KEYS[5], capped = KEYS[6], wake = KEYS[7], constraints = KEYS[8]}
local req, id, user, name, prio = ARGV[4], ARGV[6], ARGV[7], ARGV[8], ARGV[10]
local tk = task_key(K, id)

-- A queue that never had a constraint (the client's version '0') has no constraints
-- hash: one EXISTS then answers both "is the id new" and "is the version still 0".
local fresh = ARGV[5] == '0'
  and redis.call('EXISTS', tk, gone_key(K, id), K.constraints) == 0
if not fresh then
  if (redis.call('HGET', K.constraints, '~version') or '0') ~= ARGV[5] then
    return redis.error_reply('FQERR -32 constraints changed')
  end
  if redis.call('EXISTS', tk, gone_key(K, id)) > 0 then
    if ARGV[3] == 'error' and redis.call('HGET', tk, 'pushed') ~= req then
      return redis.error_reply('FQERR -3 task ' .. id .. ' already exists')
    end
    return stored_entry(K, id, req)
  end
end

local ms, us = now()
redis.call('HSET', tk, 'id', id, 'user', user, 'name', name, 'payload', ARGV[9],
  'prio', prio, 'retries', 0, 'max_retries', ARGV[11], 'created', ms,
  'keep_result', ARGV[12], 'result_ttl', ARGV[13], 'state', 'QUEUED', 'pushed', req)
redis.call('ZADD', user_index_key(K, user), ms, id)
redis.call('ZADD', name_index_key(K, name), ms, id)
-- the push clock (mono_us) and the ring's clock or floor (ring_join) in one read and one
-- write; numbers are read with Lua's string coercion (x + 0), cheaper than tonumber
local meta = redis.call('HMGET', K.meta, 'mono', 'clock', 'fair', 'floor', 'joined')
local clock = math.max(us, (meta[1] or 0) + 1)
if prio == '6' then
  redis.call('RPUSH', critical_key(K, user), id)
else
  redis.call('ZADD', normal_key(K, user), lane_score(prio + 0, clock, ARGV[1], ARGV[2] + 0), id)
end
redis.call('ZADD', K.queued, ms, id)
if not redis.call('ZSCORE', K.ring, user) and redis.call('SISMEMBER', K.capped, user) == 0 then
  if fair_timed(meta[3]) then
    local tag, joined = fair_join_tag(K, user, (meta[4] or 0) + 0, (meta[5] or -1) + 0)
    redis.call('ZADD', K.ring, string.format('%d', tag), user)
    if joined then
      redis.call('HSET', K.meta, 'mono', clock, 'joined', string.format('%d', joined))
    else
      redis.call('HSET', K.meta, 'mono', clock)
    end
  else
    local ring_clock = (meta[2] or 0) + 1
    redis.call('ZADD', K.ring, ring_clock, user)
    redis.call('HSET', K.meta, 'mono', clock, 'clock', ring_clock)
  end
else
  redis.call('HSET', K.meta, 'mono', clock)
end
redis.call('HINCRBY', K.stats, 'pushed', 1)
signal_wake(K, 1)
return {0, 'QUEUED', ms}
