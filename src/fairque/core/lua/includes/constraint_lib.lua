-- @include keys
-- @include ring_join
-- @include signal_wake
-- @include slot_members
-- constraint_lib(): the parking functions lease_tasks uses (the constraints' check, take,
-- park, due; the names' set_aside, take_aside; a global bucket's fair order), made when a
-- call needs them. A script makes every function it defines on each run
-- (about 500 instructions each, as much again for each outer function it uses), and a
-- queue without constraints needs none of these.
local function constraint_lib()
-- @include constraint_check
-- @include constraint_take
-- @include constraint_charge
-- @include constraint_park
-- @include constraint_due
-- @include set_aside
-- @include take_aside
  return constraint_check, constraint_take, constraint_park, constraint_due, set_aside,
    take_aside, constraint_order, constraint_charge
end
