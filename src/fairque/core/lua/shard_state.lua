#!lua flags=allow-oom
--[[
shard_state: what a worker of a sharded queue weighs to choose the shard it leases from
(read only): whether the shard may have ready work, its fairness mode, where its ring
stands in virtual time, and how many users wait in its ring.

Reply: {ready, mode, position, users, floor}: ready 1 when the ring or the intake holds work,
or a lease call has something to bring back first (a due scheduled task, an expired
lease, a constraint bucket due); a lease call may still find none (caps, constraints);
position the ring head's start tag (time mode; the floor when the ring is empty);
users the ring's size plus the intake's length (an upper bound of the users a lease
may serve); floor the start tag of the last user served (time mode: where the shard's
virtual time stands; the client lifts a shard whose floor lags far behind another's).
]]
-- @include now
-- @include shard_state

local K = {prefix = KEYS[1], ring = KEYS[2], meta = KEYS[3], intake = KEYS[4], delayed = KEYS[5],
  leases = KEYS[6], constraint_due = KEYS[7]}
return shard_state(K, now())
