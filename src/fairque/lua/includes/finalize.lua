-- @include notify_waiters
-- finalize(prefix, id, state, registry, ms, ttl_ms, counter, op): move a task to a
-- terminal state, index it in its registry by expiry time, trim expired entries, set
-- the TTL (its dependency set expires with it), and wake result() waiters. `op` (or
-- nil) is the request record of the call that ended it (see replayed). A task kept
-- for less than the replay window (60 s) leaves a tombstone 'gone:<id>' ('<state>
-- <op>') for that long, so a resent push or acknowledgement is still recognised.
local function finalize(prefix, id, state, registry, ms, ttl_ms, counter, op)
  local tk = prefix .. 'task:' .. id
  if op then
    redis.call('HSET', tk, 'state', state, 'ended', ms, 'op', op)
  else
    redis.call('HSET', tk, 'state', state, 'ended', ms)
  end
  redis.call('HINCRBY', prefix .. 'stats', counter, 1)
  local reg = prefix .. registry
  redis.call('ZREMRANGEBYSCORE', reg, '-inf', ms)
  notify_waiters(prefix, id)
  if ttl_ms < 60000 then
    redis.call('SET', prefix .. 'gone:' .. id, state .. ' ' .. (op or ''), 'PX', 60000)
  end
  if ttl_ms <= 0 then
    redis.call('DEL', tk)
    return
  end
  redis.call('ZADD', reg, ms + ttl_ms, id)
  redis.call('PEXPIRE', tk, ttl_ms)
  redis.call('PEXPIRE', prefix .. 'deps:blocked:' .. id, ttl_ms)
end
