-- @include fair_charge
-- fair_heartbeat(K, user, ran, fair): a held lease's task has run `ran` ms: charge
-- what its lease has not been charged yet (time mode: `fair` is the task's 'fair'
-- field; false: nothing to charge). Returns the field with the new watermark, or nil
-- when it stays.
local function fair_heartbeat(K, user, ran, fair)
  if not fair then return nil end
  local charged, w, rest = string.match(fair, '^(%d+) (%d+) (.*)$')
  local owed = math.floor(ran * 1000 / w + 0.5)
  if owed <= charged + 0 then return nil end
  fair_charge(K, user, owed - charged)
  return string.format('%d %s %s', owed, w, rest)
end
