-- mono_us(K, us): a per-queue strictly increasing microsecond clock, so tasks
-- pushed in the same microsecond (or the same batch) keep their push order.
local function mono_us(K, us)
  local last = tonumber(redis.call('HGET', K.meta, 'mono') or '0')
  if us <= last then us = last + 1 end
  redis.call('HSET', K.meta, 'mono', us)
  return us
end
