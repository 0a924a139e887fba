-- @include keys
-- A global constraint bucket (one limit that every tenant shares) hands out what its
-- limit lets through by the queue's fairness, not by push order: start-time fair
-- queueing over the bucket. Each task that starts under the bucket or waits for it (is
-- parked) gets a start tag, max(the bucket's virtual time, where its user's last task
-- there ended), and moves its user's end on by its charge: in time mode the user's
-- run-time estimate times the task's cost over the user's weight (its group's part and
-- its floor or ceiling included, as the lease charges it), in count mode its turns over
-- its turn weight (constraint_charge). Parked tasks go back to their lanes lowest tag
-- first (constraint_release), and the bucket's virtual time follows the tags it lets
-- start.
-- The state is one hash per bucket (keys.py constraint_order): field '' the virtual
-- time, a user the end of its last task; it goes when the bucket's parked set empties
-- (a new contention starts even).

-- constraint_order(K, b, user, charge, started): the start tag of a task of `user` in
-- global bucket `b`; the user's end moves on by `charge`, and a task that starts now
-- (`started`, not parked) moves the bucket's virtual time to its tag.
local function constraint_order(K, b, user, charge, started)
  local ok = constraint_order_key(K, b)
  local f = redis.call('HMGET', ok, '', user)
  local v = tonumber(f[1] or '0')
  local tag = math.max(v, tonumber(f[2] or '0'))
  local ends = string.format('%.17g', tag + charge)
  if started and tag > v then
    redis.call('HSET', ok, user, ends, '', string.format('%.17g', tag))
  else
    redis.call('HSET', ok, user, ends)
  end
  return tag
end
