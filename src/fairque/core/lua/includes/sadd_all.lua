-- sadd_all(key, members): SADD any number of members, in pieces small enough for
-- Lua's unpack() (which fails past a few thousand values, after earlier writes).
local function sadd_all(key, members)
  for i = 1, #members, 1000 do
    redis.call('SADD', key, unpack(members, i, math.min(i + 999, #members)))
  end
end
