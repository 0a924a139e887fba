-- @include observe
-- count_completions(K, acc): write what complete_task gathered in `acc` (see there):
-- the 'completed' counter and the 'run' histogram, once for all of a call's completions,
-- and the registry writes gathered in acc.later (many members per command, in slices
-- the Lua stack takes).
local function count_completions(K, acc)
  local later = acc.later
  if later then
    local leases, ends, reg = later.leases, later.ends, later.registry
    for at = 1, #leases, 1000 do
      redis.call('ZREM', K.leases, unpack(leases, at, math.min(#leases, at + 999)))
    end
    for at = 1, #ends, 1000 do  -- (score, member) pairs: slices of an even length
      redis.call('ZADD', K.ends, unpack(ends, at, math.min(#ends, at + 999)))
    end
    for at = 1, #reg, 1000 do
      redis.call('ZADD', K.finished, unpack(reg, at, math.min(#reg, at + 999)))
    end
  end
  if acc.done > 0 then redis.call('HINCRBY', K.stats, 'completed', acc.done) end
  observe(K, 'run_ms', acc.runs)
end
