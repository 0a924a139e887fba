-- @include keys
-- @include ring_join
-- @include signal_wake
-- constraint_lib(): the constraint functions lease_tasks uses (check, take, park, due),
-- made when a call needs them. A script makes every function it defines on each run
-- (about 500 instructions each, as much again for each outer function it uses), and a
-- queue without constraints needs none of these.
local function constraint_lib()
-- @include constraint_check
-- @include constraint_take
-- @include constraint_park
-- @include constraint_due
  return constraint_check, constraint_take, constraint_park, constraint_due
end
