-- intake_head(K): the first INTAKE_BATCH entries of the intake (plain tasks pushed one
-- at a time, not yet placed), oldest first; the caller places them with
-- place_intake (included only where there are some: a script makes every function it
-- defines on each run).
local INTAKE_BATCH = 500
local function intake_head(K)
  return redis.call('LRANGE', K.intake, 0, INTAKE_BATCH - 1)
end
