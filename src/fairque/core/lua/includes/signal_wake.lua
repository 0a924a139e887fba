-- signal_wake(K, n): push up to 16 wake-up tokens so idle workers look at the
-- queue again (new ready work, or a new earliest due time for their blocking wait).
-- The list is cut back to 64 tokens once it holds more than 128: while no worker
-- takes tokens (all busy, or none running) a push costs one command, not two.
local function signal_wake(K, n)
  local tokens = {}
  for i = 1, math.min(n, 16) do tokens[i] = '1' end
  if redis.call('LPUSH', K.wake, unpack(tokens)) > 128 then
    redis.call('LTRIM', K.wake, 0, 63)
  end
end
