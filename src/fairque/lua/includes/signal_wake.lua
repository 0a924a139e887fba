-- signal_wake(K, n): push up to 16 wake-up tokens so idle workers look at the
-- queue again (new ready work, or a new earliest due time for their blocking wait).
local function signal_wake(K, n)
  local tokens = {}
  for i = 1, math.min(n, 16) do tokens[i] = '1' end
  if redis.call('LPUSH', K.wake, unpack(tokens)) > 64 then
    redis.call('LTRIM', K.wake, 0, 63)
  end
end
