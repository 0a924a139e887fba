-- progress_fields(fields, progress): append to an HSET's `fields` the task's 'progress'
-- and 'progress_msg' from a heartbeat's '<fraction>\n<message>' ('': none new).
local function progress_fields(fields, progress)
  if progress == '' then return fields end
  local at = string.find(progress, '\n', 1, true)
  fields[#fields + 1] = 'progress'
  fields[#fields + 1] = string.sub(progress, 1, at - 1)
  fields[#fields + 1] = 'progress_msg'
  fields[#fields + 1] = string.sub(progress, at + 1)
  return fields
end
