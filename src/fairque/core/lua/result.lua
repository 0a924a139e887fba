#!lua flags=allow-oom
--[[
result: read a task's outcome; optionally consume it (fetch once), or register as a
waiter.

A waiter (watch=1) for a task that has not ended leaves a 'watch' key; the script
that ends the task then pushes a token to 'done:<id>', which the waiter blocks on
(BLMOVE on the same list, so every waiter is woken). Reading the state and
registering happen in this one call, so a completion cannot slip in between.

Consuming an ended task's outcome (FINISHED, FAILED or CANCELED) records the request
id in the task's 'consumed' field; from then on every read answers {0} as for an
unknown task, except a resend of the consuming request, which gets the outcome again
(the data itself stays until the task expires).

ARGV[1] id
ARGV[2] consume     1: consume the outcome (fetch once)
ARGV[3] watch       1: register as a waiter when the task has not ended
ARGV[4] watch_ms    how long the registration lasts
ARGV[5] req         request id of a consuming read (the same when it is resent)

Reply: {0} no such task (never pushed, expired, deleted) or its outcome was consumed;
       {code, result, error, ended_ms, traceback, reason, details} for an ended task,
       code 1 FINISHED, 2 FAILED, 3 CANCELED (result: the stored result, false when
       none is kept; error, traceback, reason, details: the failure's fields, false
       when absent);
       {4, state} not ended yet.
]]
-- @include keys

local K = {prefix = KEYS[1]}
local id, req = ARGV[1], ARGV[5]
local tk = task_key(K, id)
local f = redis.call('HMGET', tk, 'state', 'result', 'error', 'ended', 'traceback', 'reason',
  'details', 'consumed')
local state = f[1]
if not state then return {0} end
local code = ({FINISHED = 1, FAILED = 2, CANCELED = 3})[state]
if not code then
  if ARGV[3] == '1' then
    redis.call('SET', watch_key(K, id), '1', 'PX', tonumber(ARGV[4]))
  end
  return {4, state}
end
if f[8] and f[8] ~= req then return {0} end
if ARGV[2] == '1' and not f[8] then redis.call('HSET', tk, 'consumed', req) end
return {code, f[2] or false, f[3] or false, f[4] or false, f[5] or false, f[6] or false,
  f[7] or false}
