-- notify_waiters(prefix, id): wake clients blocked in result() on this task. Only
-- tasks someone is waiting for (a 'watch' key) get a token, so the common path
-- costs one EXISTS.
local function notify_waiters(prefix, id)
  local watch = prefix .. 'watch:' .. id
  if redis.call('EXISTS', watch) == 1 then
    local done = prefix .. 'done:' .. id
    redis.call('RPUSH', done, '1')
    redis.call('PEXPIRE', done, 60000)
    redis.call('DEL', watch)
  end
end
