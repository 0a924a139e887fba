-- @include fair_timed
-- shard_state(K, ms): what a worker of a sharded queue weighs to choose the shard it
-- leases from: {ready, mode, position, users, floor} (see shard_state.lua). Read only;
-- K needs ring, meta, intake, delayed, leases and constraint_due.
local function shard_state(K, ms)
  local m = redis.call('HMGET', K.meta, 'fair', 'floor')
  local users = redis.call('ZCARD', K.ring) + redis.call('LLEN', K.intake)
  local ready = users > 0
  if not ready then
    for _, key in ipairs({K.delayed, K.leases, K.constraint_due}) do
      if #redis.call('ZRANGEBYSCORE', key, '-inf', ms, 'LIMIT', 0, 1) > 0 then
        ready = true
        break
      end
    end
  end
  local head = redis.call('ZRANGE', K.ring, 0, 0, 'WITHSCORES')[2]
  local position = tonumber(head or m[2] or '0')
  return {ready and 1 or 0, fair_timed(m[1]) and 'time' or 'count',
    string.format('%d', position), users, string.format('%d', tonumber(m[2] or '0'))}
end
