-- @include fair_charge
-- fair_heartbeat(K, user, ran, charged, fw): a held lease's task has run `ran` ms:
-- charge what its lease has not been charged yet (time mode; `charged` false: nothing).
-- Returns the task's new 'charged' watermark, or nil when it stays.
local function fair_heartbeat(K, user, ran, charged, fw)
  if not charged then return nil end
  local owed = ran - charged
  if owed <= 0 then return nil end
  fair_charge(K, user, owed / (tonumber(fw) or 1))
  return ran
end
