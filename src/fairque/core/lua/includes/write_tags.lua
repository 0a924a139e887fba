-- write_tags(K, tags): write the start tags `tags` (user -> tag, virtual us) to the
-- ring in one ZADD (time mode, a batch's users whose tags moved while read at once).
local function write_tags(K, tags)
  local written = {}
  for user, tag in pairs(tags) do
    written[#written + 1] = string.format('%d', tag)
    written[#written + 1] = user
  end
  if #written > 0 then redis.call('ZADD', K.ring, unpack(written)) end
end
