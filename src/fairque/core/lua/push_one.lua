#!lua
--[[
push_one: enqueue one plain task: no dependencies, delay, due time, timeout or
constraint buckets (the client sends anything else through push.lua). The fast path of
a push: a new task is written with one HSET and one entry at the end of the intake list
('<push ms>\n<prio>\n<user>\n<name>\n<id>'); the next lease call (or stats, maintain,
place: the readers place first) puts it into the QUEUED registry, its listing indexes and
its user's lane, and the user into the ring (includes/place_intake.lua). Once placed,
the keyspace is what push.lua leaves for the same task.

A push of an id that exists (or ended within the last minute: its tombstone, see
finalize) is a no-op that returns the stored task, so a resent push never writes a
task twice.

ARGV[1] on_dup      'return' (existing task is a no-op) | 'error' (DuplicateTask, except
                    for a resend of the push that created it)
ARGV[2] req         request id (unique per call; the same when a call is resent), kept
                    in the task's 'pushed' field
ARGV[3] cver        the constraints version the client matched the task against
ARGV[4] id, ARGV[5] user, ARGV[6] name, ARGV[7] payload, ARGV[8] prio (1..6),
ARGV[9] max_retries, ARGV[10] keep_result (0|1), ARGV[11] result_ttl_ms
ARGV[12] max_queued  the queue's default backlog quota per user ('0': none)
ARGV[13] max_bytes  the queue's default byte quota per user ('0' or absent: none)

Reply: one entry, as push.lua's: {0, 'QUEUED', created_ms} for a new task, {1, <HGETALL
       of the existing task>, mine} for an id that exists, {2, state} for a tombstone.
Errors: 'FQERR -32' (StaleConstraints) when the queue's constraints changed since the
        client read them; 'FQERR -3 <id>' (DuplicateTask) when on_dup is 'error';
        'FQERR -34 <quota> <backlog> <user>' (QuotaExceeded) when the user's backlog is
        at its quota ('... <user>\t<group>' when its group's backlog is at the
        group's quota); 'FQERR -35 <quota> <bytes> <user>' when its payload would take
        the bytes the user's tasks that have not ended hold past its byte quota (as
        push.lua's). Nothing is written then.
]]
-- @include now
-- @include keys
-- @include signal_wake
-- @include stored_entry
-- @include backlog_add
-- @include task_stock
-- @include bytes_add

local K = {prefix = KEYS[1], intake = KEYS[2], wake = KEYS[3], constraints = KEYS[4],
  stats = KEYS[5], backlog = KEYS[6], quotas = KEYS[7]}
local req, id, user, name, prio = ARGV[2], ARGV[4], ARGV[5], ARGV[6], ARGV[8]
local tk = task_key(K, id)

-- A queue that never had a constraint (the client's version '0') and has no quota per
-- user has neither hash: one EXISTS then answers "is the id new", "is the version still
-- 0" and "is the quota the queue's default".
local fresh = ARGV[3] == '0'
  and redis.call('EXISTS', tk, gone_key(K, id), K.constraints, K.quotas) == 0
if not fresh then
  if (redis.call('HGET', K.constraints, '~version') or '0') ~= ARGV[3] then
    return redis.error_reply('FQERR -32 constraints changed')
  end
  if redis.call('EXISTS', tk, gone_key(K, id)) > 0 then
    if ARGV[1] == 'error' and redis.call('HGET', tk, 'pushed') ~= req then
      return redis.error_reply('FQERR -3 task ' .. id .. ' already exists')
    end
    return stored_entry(K, id, req)
  end
end

-- the task joins its user's backlog first: the count answers the quota check, and a
-- push past the quota takes it back, so the refusal leaves nothing written
local quota, kept, bquota = ARGV[12], nil, ARGV[13] or '0'
if not fresh then
  kept = redis.call('HMGET', K.quotas, user, '\0groups', user .. '\0b')
  quota, bquota = kept[1] or quota, kept[3] or bquota
end
local queued = redis.call('HINCRBY', K.backlog, user, 1)
-- on a queue that keeps its groups' backlogs (set_group_limits marks the quotas too, so
-- such a queue never takes the fresh path), the task joins its user's group's as well
local group, have, limit
if kept and kept[2] then
  group = redis.call('HGET', tenant_key(K, user), 'group')
  if group then
    local gk = group_key(K, group)
    have = redis.call('HINCRBY', gk, 'backlog', 1)
    limit = redis.call('HGET', gk, 'quota')
  end
end
if quota ~= '0' and queued > quota + 0 then
  backlog_add(K, user, -1)
  return redis.error_reply('FQERR -34 ' .. quota .. ' ' .. (queued - 1) .. ' ' .. user)
end
if limit and have > limit + 0 then
  backlog_add(K, user, -1)
  return redis.error_reply('FQERR -34 ' .. limit .. ' ' .. (have - 1) .. ' ' .. user .. '\t'
    .. group)
end
-- under a byte quota the payload counts from now until the task ends
local bytes
if bquota ~= '0' then
  bytes = #ARGV[7]
  local used = redis.call('HGET', K.backlog, user .. '\0b') or '0'
  if used + bytes > bquota + 0 then
    backlog_add(K, user, -1)  -- (its group's backlog too)
    return redis.error_reply('FQERR -35 ' .. bquota .. ' ' .. used .. ' ' .. user)
  end
  bytes_add(K, user, bytes)
end
local ms = now()
if bytes then
  redis.call('HSET', tk, 'id', id, 'user', user, 'name', name, 'payload', ARGV[7],
    'created', ms, 'prio', prio, 'max_retries', ARGV[9], 'keep_result', ARGV[10],
    'result_ttl', ARGV[11], 'state', 'QUEUED', 'pushed', req, 'bytes', bytes)
elseif task_stock(prio, ARGV[9], ARGV[10], ARGV[11]) then
  redis.call('HSET', tk, 'id', id, 'user', user, 'name', name, 'payload', ARGV[7],
    'created', ms, 'state', 'QUEUED', 'pushed', req)
else
  redis.call('HSET', tk, 'id', id, 'user', user, 'name', name, 'payload', ARGV[7],
    'created', ms, 'prio', prio, 'max_retries', ARGV[9], 'keep_result', ARGV[10],
    'result_ttl', ARGV[11], 'state', 'QUEUED', 'pushed', req)
end
-- its indexes, the QUEUED registry, its lane and the ring when the intake is placed
redis.call('RPUSH', K.intake, ms .. '\n' .. prio .. '\n' .. user .. '\n' .. name .. '\n' .. id)
redis.call('HINCRBY', K.stats, 'pushed', 1)
signal_wake(K, 1)
return {0, 'QUEUED', ms}
