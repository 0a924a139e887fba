#!lua flags=allow-oom
--[[
workers: the live registered workers with the age of their last heartbeat. A worker
whose registration expired (it died without leaving) is never listed.

Reply: flat list {info JSON, milliseconds since last heartbeat, ...}.
]]
-- @include now

local K = {prefix = KEYS[1], workers = KEYS[2], workers_seen = KEYS[3]}
local ms = now()
local out = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', K.workers_seen, '(' .. ms, '+inf')) do
  local entry = redis.call('HGET', K.workers, id)
  local sp = entry and string.find(entry, ' ', 1, true)
  if sp then
    out[#out + 1] = string.sub(entry, sp + 1)
    out[#out + 1] = ms - tonumber(string.sub(entry, 1, sp - 1))
  end
end
return out
