-- @include keys
-- notify_waiters(K, id): wake clients blocked in result() on this task. Only
-- tasks someone is waiting for (a 'watch' key) get a token, so the common path
-- costs one EXISTS.
local function notify_waiters(K, id)
  local watch = watch_key(K, id)
  if redis.call('EXISTS', watch) == 1 then
    local done = done_key(K, id)
    redis.call('RPUSH', done, '1')
    redis.call('PEXPIRE', done, 60000)
    redis.call('DEL', watch)
  end
end
