-- @include notify_waiters
-- finalize(prefix, id, state, registry, ms, ttl_ms, counter): move a task to a terminal
-- state, index it in its registry by expiry time, trim expired entries, set the TTL
-- (its dependency set expires with it), and wake result() waiters.
local function finalize(prefix, id, state, registry, ms, ttl_ms, counter)
  local tk = prefix .. 'task:' .. id
  redis.call('HSET', tk, 'state', state, 'ended', ms)
  redis.call('HINCRBY', prefix .. 'stats', counter, 1)
  local reg = prefix .. registry
  redis.call('ZREMRANGEBYSCORE', reg, '-inf', ms)
  notify_waiters(prefix, id)
  if ttl_ms <= 0 then
    redis.call('DEL', tk)
    return
  end
  redis.call('ZADD', reg, ms + ttl_ms, id)
  redis.call('PEXPIRE', tk, ttl_ms)
  redis.call('PEXPIRE', prefix .. 'deps:blocked:' .. id, ttl_ms)
end
