-- write_later(K, later): the registry writes that complete_task gathered in `later`
-- (acc.later, see there), once for all of a call's completions: many members per
-- command, in slices the Lua stack takes. (The completions themselves are counted by
-- the process that sent them: fairque.core.tally.)
local function write_later(K, later)
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
end
