-- signal_wake(prefix, n): push up to 16 wake-up tokens so idle workers look at the
-- queue again (new ready work, or a new earliest due time for their blocking wait).
local function signal_wake(prefix, n)
  local tokens = {}
  for i = 1, math.min(n, 16) do tokens[i] = '1' end
  if redis.call('LPUSH', prefix .. 'wake', unpack(tokens)) > 64 then
    redis.call('LTRIM', prefix .. 'wake', 0, 63)
  end
end
