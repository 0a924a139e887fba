-- aside_bucket(user, name): the parked-set bucket of `user`'s tasks named `name` set
-- aside (set_aside); a bucket id starting with '~' is no constraint's (ops/inspection.py
-- reads a task's 'parked' field so).
local function aside_bucket(user, name)
  return '~' .. user .. ':' .. name
end
