-- add_all(command, key, values): `command key <values...>` for any number of values
-- (ZADD score/member pairs, RPUSH members), in pieces of at most 2,000 values: an even
-- count, so a ZADD pair is never split, and few enough for Lua's unpack().
local function add_all(command, key, values)
  for i = 1, #values, 2000 do
    redis.call(command, key, unpack(values, i, math.min(i + 1999, #values)))
  end
end
