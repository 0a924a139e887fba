-- @include fair_charge
-- fair_heartbeat(K, user, ran, charged, fw): a held lease's task has run `ran` ms:
-- charge what its lease has not been charged yet (time mode; `charged` false: nothing).
-- Returns the task's new 'charged' watermark (virtual us), or nil when it stays.
local function fair_heartbeat(K, user, ran, charged, fw)
  if not charged then return nil end
  local owed = math.floor(ran * 1000 / (tonumber(fw) or 1) + 0.5)
  if owed <= charged + 0 then return nil end
  fair_charge(K, user, owed - charged)
  return owed
end
