-- remember(tk, req, answer): record that request `req` changed task hash `tk` and got
-- `answer`, for replayed().
local function remember(tk, req, answer)
  redis.call('HSET', tk, 'op', req .. ' ' .. answer)
end
