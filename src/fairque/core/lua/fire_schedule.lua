#!lua
--[[
fire_schedule: enqueue the tasks of a schedule's due slots and move its cursor past
them, as the leading scheduler planned it (fairque.schedules.plan).

ARGV[1] req         request id (unique per call; the same when a call is resent)
ARGV[2] token       the caller's scheduler lock token (the fence)
ARGV[3] id          schedule id
ARGV[4] rev         the schedule revision the plan was made from
ARGV[5] cursor      the cursor the plan was made from
ARGV[6] new_cursor  every slot up to it is handled by this call
ARGV[7] next_ms     the first slot after new_cursor (-1: none)
ARGV[8] last_ms     the latest slot fired by this call (-1: none)
ARGV[9] skipped     slots skipped by the misfire policy
ARGV[10] ordering   'aging' | 'strict'
ARGV[11] horizon_us aging horizon in microseconds
ARGV[12] user       the task template: user, name, priority (1..6), max_retries,
ARGV[13] name         timeout_ms (-1 none), keep_result (0|1), result_ttl_ms; the
ARGV[14] prio         payload is the schedule's own
ARGV[15] max_retries
ARGV[16] timeout_ms
ARGV[17] keep_result
ARGV[18] result_ttl_ms
ARGV[19] cver       the constraints version the leader matched the template against
ARGV[20] cons       the template's constraint buckets (JSON array, '' for none)
ARGV[21] cost       the template's cost ('1', or more: stored as push stores it, the
                    queue marked 'costly')
ARGV[22] n          number of slots fired; then one task id per slot
                    (fairque.schedules.slot_task_id), from ARGV[23]

Each task is written as push writes a new task due now (QUEUED), listing indexes
included. A task id that
exists, or ended within the last minute, is not written again: a slot enqueues once
whatever happens. The cursor check makes the whole plan happen once: a plan made
from an older revision or cursor changes nothing.

Reply: {1, created} (tasks written) | {0, 0}: the schedule was removed, paused or
       changed since it was read: nothing was written (read it again). A resend
       answers as the first run did.
Errors: 'FQERR -23' (NotLeader) when the token does not hold the scheduler lock;
        'FQERR -32' (StaleConstraints) when the queue's constraints changed since the
        leader read them (nothing written: it reads them and fires again).
]]
-- @include now
-- @include keys
-- @include replayed
-- @include mono_us
-- @include enqueue_ready
-- @include backlog_add
-- @include signal_wake
-- @include task_stock

local K = {prefix = KEYS[1], schedules = KEYS[2], scheduler_lock = KEYS[3], ring = KEYS[4],
  queued = KEYS[5], meta = KEYS[6], stats = KEYS[7], capped = KEYS[8], wake = KEYS[9],
  constraints = KEYS[10], backlog = KEYS[11]}
local req, id = ARGV[1], ARGV[3]
local sk = schedule_key(K, id)
local stored = redis.call('HMGET', sk, 'op', 'rev', 'cursor', 'enabled', 'payload')
local answer = replayed(stored[1], req)
if answer then return {1, tonumber(answer)} end
if redis.call('GET', K.scheduler_lock) ~= ARGV[2] then
  return redis.error_reply('FQERR -23 this scheduler does not hold the lock')
end
if stored[2] ~= ARGV[4] or stored[3] ~= ARGV[5] or stored[4] ~= '1' then return {0, 0} end
if (redis.call('HGET', K.constraints, '~version') or '0') ~= ARGV[19] then
  return redis.error_reply('FQERR -32 constraints changed')
end
local cons = ARGV[20]
local ordering, horizon_us = ARGV[10], tonumber(ARGV[11])
local user, name, prio = ARGV[12], ARGV[13], tonumber(ARGV[14])
local timeout_ms, cost, n = tonumber(ARGV[16]), ARGV[21], tonumber(ARGV[22])
local ms, us = now()
local created = 0
local stock = task_stock(ARGV[14], ARGV[15], ARGV[17], ARGV[18])
for i = 23, 22 + n do
  local tid = ARGV[i]
  local tk = task_key(K, tid)
  if redis.call('EXISTS', tk, gone_key(K, tid)) == 0 then
    local fields = {'id', tid, 'user', user, 'name', name, 'payload', stored[5],
      'created', ms, 'state', 'QUEUED', 'pushed', req}
    if not stock then  -- (see task_stock)
      fields[15], fields[16], fields[17], fields[18] = 'prio', prio, 'max_retries', ARGV[15]
      fields[19], fields[20], fields[21], fields[22] = 'keep_result', ARGV[17],
        'result_ttl', ARGV[18]
    end
    if timeout_ms >= 0 then fields[#fields + 1] = 'timeout'; fields[#fields + 1] = timeout_ms end
    if cons ~= '' then fields[#fields + 1] = 'cons'; fields[#fields + 1] = cons end
    if cost ~= '1' then fields[#fields + 1] = 'cost'; fields[#fields + 1] = cost end
    redis.call('HSET', tk, unpack(fields))
    -- the listing's indexes, by creation time, as push keeps them (see list_tasks)
    redis.call('ZADD', user_index_key(K, user), ms, tid)
    redis.call('ZADD', name_index_key(K, name), ms, tid)
    enqueue_ready(K, tid, user, prio, mono_us(K, us), ms, ordering, horizon_us, true)
    created = created + 1
  end
end
local next_ms, last_ms, skipped = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
redis.call('HSET', sk, 'cursor', ARGV[6], 'next', next_ms >= 0 and next_ms or '',
  'op', req .. ' ' .. created)
if last_ms >= 0 then redis.call('HSET', sk, 'last', last_ms, 'last_at', ms) end
if n > 0 then redis.call('HINCRBY', sk, 'fired', n) end
if skipped > 0 then
  redis.call('HINCRBY', sk, 'skipped', skipped)
  redis.call('HINCRBY', K.stats, 'schedule_skipped', skipped)
end
redis.call('ZADD', K.schedules, next_ms >= 0 and next_ms or '+inf', id)
if created > 0 then
  redis.call('HINCRBY', K.stats, 'pushed', created)
  redis.call('HINCRBY', K.stats, 'schedule_fired', created)
  backlog_add(K, user, created)
  if cost ~= '1' then redis.call('HSET', K.meta, 'costly', '1') end
  signal_wake(K, created)
end
return {1, created}
