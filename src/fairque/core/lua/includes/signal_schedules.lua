-- signal_schedules(K): wake the leading scheduler, which blocks on K.schedules_wake
-- until its next slot is due, so a changed schedule is planned at once.
local function signal_schedules(K)
  if redis.call('LPUSH', K.schedules_wake, '1') > 4 then
    redis.call('LTRIM', K.schedules_wake, 0, 3)
  end
end
