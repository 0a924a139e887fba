-- Time-fair accounting (docs/concepts.md, "Fair by worker time"). A queue is fair by
-- worker time ('time', the default) or by turns ('count'): meta 'fair'. In time mode the
-- ring's score is a user's start tag in virtual microseconds, an integer (so the ring
-- stays a compact sorted set whose scores compare without parsing): a lease moves it on
-- by the user's run-time estimate over its weight (lease_tasks), the end of the attempt
-- corrects that to the handler's run as its worker reported it, never more than the
-- time the lease was held on the server's clock (the charge without a report:
-- fair_settle, handler_ms), a heartbeat charges the time run so far (fair_heartbeat). The task's
-- 'fair' field holds, space-separated: what its lease moved the tag by so far (virtual
-- us: the watermark), the weight it was charged at, the user's estimate at the lease
-- (ms; '-': none yet) and the lease's start (us); so a resent end or heartbeat charges
-- nothing twice and a stale lease (fenced out) charges nothing. meta 'floor' is the start tag of the last user served
-- from the ring's head, never lower than before: a user that joins the ring starts at
-- max(its saved tag, floor), at most the queue's lead bound ahead of it (meta 'max_lead',
-- FAIR_LEAD by default), and the periodic scripts bring a user in the ring that is
-- further ahead back to it (bound_lead).
local FAIR_DEFAULT = 'time'   -- the mode of a queue whose meta has no 'fair'
local FAIR_FIRST_EST = 10     -- ms charged per lease while neither the user nor the
                              -- queue has a measured run (see fair_first_est)
local FAIR_LEAD = 60000000    -- virtual us a user may be ahead of the floor (a minute)
local FAIR_ALPHA = 0.2        -- weight of the newest run in the moving estimate
local FAIR_MIN = 10           -- us an attempt costs at least (no lease is free)
local FAIR_STEP = 1           -- virtual us between users joining at the same floor

-- fair_timed(mode): whether meta 'fair' = `mode` (false when absent) is time mode.
local function fair_timed(mode)
  return (mode or FAIR_DEFAULT) == 'time'
end
