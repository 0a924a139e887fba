-- handler_ms(span, run_us): an attempt's run in ms: `span` (ms, what the server saw
-- from the lease to now) lowered to `run_us`, the handler's run as its worker measured
-- it (us, a string; '' or nil: not reported). A report can only lower the charge: a
-- worker cannot charge its tenant more than the server saw, nor any other tenant.
local function handler_ms(span, run_us)
  if run_us and run_us ~= '' then
    local ran = run_us / 1000
    if ran < span then return ran end
  end
  return span
end
