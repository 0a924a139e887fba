-- @include fair_charge
-- @include handler_ms
-- fair_heartbeat(K, user, ran, fair, reported): a held lease's task has run `ran` ms
-- (the lease's span so far), or `reported` us by its worker's clock (a string; '': not
-- reported; the lower of the two counts, handler_ms): charge what its lease has not
-- been charged yet (time mode: `fair` is the task's 'fair' field; false: nothing to
-- charge). Returns the field with the new watermark, or nil when it stays. A task
-- leased ahead of its run reports 0: its wait is not charged.
local function fair_heartbeat(K, user, ran, fair, reported)
  if not fair then return nil end
  local charged, w, rest = string.match(fair, '^(%d+) (%S+) (.*)$')
  local owed = math.floor(handler_ms(ran, reported) * 1000 / w + 0.5)
  if owed <= charged + 0 then return nil end
  fair_charge(K, user, owed - charged)
  return string.format('%d %s %s', owed, w, rest)
end
