-- @include observe
-- count_completions(K, acc): write what complete_task gathered in `acc` (see there):
-- the 'completed' counter and the 'run' histogram, once for all of a call's completions.
local function count_completions(K, acc)
  if acc.done > 0 then redis.call('HINCRBY', K.stats, 'completed', acc.done) end
  observe(K, 'run', acc.runs)
end
