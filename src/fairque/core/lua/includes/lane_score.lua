-- lane_score(prio, us, ordering, horizon_us): normal-lane score, lowest pops first.
-- aging:  the task is ordered as if it arrived (prio / 5) * horizon earlier.
-- strict: priority first, FIFO within a priority (times relative to 2023-11).
local function lane_score(prio, us, ordering, horizon_us)
  if ordering == 'strict' then
    return (5 - prio) * 1e15 + (us - 1.7e15)
  end
  return us - (prio / 5) * horizon_us
end
