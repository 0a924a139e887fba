--[[
result: read a task's outcome; optionally consume it, or register as a waiter.

A waiter (watch=1) for a task that has not ended leaves a 'watch' key; the script
that ends the task then pushes a token to 'done:<id>', which the waiter blocks on
(BLMOVE on the same list, so every waiter is woken). Reading the state and
registering happen in this one call, so a completion cannot slip in between.

KEYS[1] prefix  fq:{<queue>}:  per-task and per-user keys derive from it (includes/keys.lua)

ARGV[1] id
ARGV[2] consume     1: delete the stored result after reading it (fetch once)
ARGV[3] watch       1: register as a waiter when the task has not ended
ARGV[4] watch_ms    how long the registration lasts

Reply: {0} no such task (never pushed, expired or deleted);
       {1, result or false} FINISHED; {2, error} FAILED; {3, error} CANCELED;
       {4, state} not ended yet.
]]
-- @include keys

local K = {prefix = KEYS[1]}
local id = ARGV[1]
local tk = task_key(K, id)
local f = redis.call('HMGET', tk, 'state', 'result', 'error')
local state = f[1]
if not state then return {0} end
if state == 'FINISHED' then
  if ARGV[2] == '1' and f[2] then redis.call('HDEL', tk, 'result') end
  return {1, f[2]}
end
if state == 'FAILED' then return {2, f[3] or ''} end
if state == 'CANCELED' then return {3, f[3] or ''} end
if ARGV[3] == '1' then
  redis.call('SET', watch_key(K, id), '1', 'PX', tonumber(ARGV[4]))
end
return {4, state}
