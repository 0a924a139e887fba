-- @include keys
-- @include notify_waiters
-- @include unindex_task
-- @include bytes_add
-- finalize(K, id, state, registry, ms, ttl_ms, counter, op): move a task to a terminal
-- state, index it in its `registry` key by expiry time, trim expired entries, set the
-- TTL, and wake result() waiters. A task that did not finish keeps its blocked set (its
-- 'wait' dependents) as long as its data; a FINISHED one has released and deleted it
-- already (complete_task). `op` (or nil)
-- is the request record of the call that ended it (see replayed). A task kept for less
-- than the replay window (60 s) leaves a tombstone 'gone:<id>' ('<state> <op>') for
-- that long, so a resent push or acknowledgement is still recognised. A task deleted
-- here leaves its user's and name's indexes at once; one kept for ttl_ms is listed in
-- `ends` until then, for maintain to unindex it when its data has expired.
-- `known` (or nil) spares reads the caller has made: {user = , name = } (the task's
-- 'user' and 'name' fields, false when absent), unwatched = true (no 'watch' key), and
-- result = <value> (also written to the task's 'result' field), counted = true (the
-- caller adds to `counter`), trimmed = true (the registry was trimmed at `ms` already),
-- later = {ends = {}, registry = {}} (the two expiry ZADDs' score, member pairs are
-- appended there for the caller to write, one ZADD each for many tasks), bytes = <the
-- task's 'bytes' field, false when absent: required with `user`> (a task counted against its user's byte
-- quota counts what its record keeps from now on: bytes_add).
local function finalize(K, id, state, registry, ms, ttl_ms, counter, op, known)
  local tk = task_key(K, id)
  local result = known and known.result
  if op and result then
    redis.call('HSET', tk, 'state', state, 'ended', ms, 'op', op, 'result', result)
  elseif op then
    redis.call('HSET', tk, 'state', state, 'ended', ms, 'op', op)
  else
    redis.call('HSET', tk, 'state', state, 'ended', ms)
  end
  if not (known and known.counted) then redis.call('HINCRBY', K.stats, counter, 1) end
  if not (known and known.trimmed) then redis.call('ZREMRANGEBYSCORE', registry, '-inf', ms) end
  if not (known and known.unwatched) then notify_waiters(K, id) end
  if ttl_ms < 60000 then
    redis.call('SET', gone_key(K, id), state .. ' ' .. (op or ''), 'PX', 60000)
  end
  local owner, bytes
  if known and known.user ~= nil then
    owner, bytes = {known.user, known.name}, known.bytes
  else
    owner = redis.call('HMGET', tk, 'user', 'name', 'bytes')
    bytes = owner[3]
  end
  if bytes then  -- counted against its user's byte quota: what its record keeps
    local kept = 0
    if ttl_ms > 0 then
      if state ~= 'FINISHED' then kept = bytes + 0 elseif result then kept = #result end
    end
    if kept ~= bytes + 0 then bytes_add(K, owner[1], kept - bytes) end
    if kept > 0 then redis.call('HSET', kept_key(K, owner[1]), id, kept) end
  end
  if ttl_ms <= 0 then
    unindex_task(K, id, owner[1], owner[2])
    redis.call('DEL', tk)
    return
  end
  local entry = (owner[1] or '') .. '\n' .. (owner[2] or '') .. '\n' .. id
  local later = known and known.later
  if later then
    local ends, reg = later.ends, later.registry
    ends[#ends + 1] = ms + ttl_ms
    ends[#ends + 1] = entry
    reg[#reg + 1] = ms + ttl_ms
    reg[#reg + 1] = id
  else
    redis.call('ZADD', K.ends, ms + ttl_ms, entry)
    redis.call('ZADD', registry, ms + ttl_ms, id)
  end
  redis.call('PEXPIRE', tk, ttl_ms)
  if state ~= 'FINISHED' then redis.call('PEXPIRE', deps_blocked_key(K, id), ttl_ms) end
end
