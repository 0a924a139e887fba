#!lua flags=allow-oom
--[[
bulk_retry: put each of the given FAILED (or CANCELED) tasks back in its user's lane
with a fresh retry budget, as retry.lua does one (an operator's bulk "try again"). A
task in another state, or gone, is left as it is.

ARGV[1] ordering    'aging' | 'strict'
ARGV[2] horizon_us
ARGV[3] req         request id (unique per call; the same when a call is resent)
ARGV[4] state       'FAILED' | 'CANCELED': the state a task must be in to be retried
ARGV[5..]           task ids

Reply: how many were re-queued by this request (a resend answers the same: a task
       whose last op is this request counts).
]]
-- @include now
-- @include keys
-- @include signal_wake
-- @include replayed
-- @include requeue_ended

local K = {prefix = KEYS[1], ring = KEYS[2], queued = KEYS[3], failed = KEYS[4],
  canceled = KEYS[5], meta = KEYS[6], capped = KEYS[7], wake = KEYS[8], ends = KEYS[9],
  backlog = KEYS[10]}
local req, state = ARGV[3], ARGV[4]
local horizon_us = tonumber(ARGV[2])
local ms, us = now()
local done, fresh = 0, 0
for i = 5, #ARGV do
  local id = ARGV[i]
  local f = redis.call('HMGET', task_key(K, id), 'state', 'user', 'prio', 'op', 'name')
  if replayed(f[4], req) then
    done = done + 1
  elseif f[1] == state then
    requeue_ended(K, id, f[2], f[3], f[5], req, ARGV[1], horizon_us, ms, us)
    done, fresh = done + 1, fresh + 1
  end
end
if fresh > 0 then signal_wake(K, fresh) end
return done
