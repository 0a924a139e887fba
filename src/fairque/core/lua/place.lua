#!lua flags=allow-oom
--[[
place: put the intake's first tasks (plain tasks pushed one at a time, not yet placed)
into the QUEUED registry, their indexes and their users' lanes, and those users into the
ring, as every lease call does first. The readers of registries, indexes, lanes and the
ring (listings, a user's backlog, a task's place, the ring's order) call it until nothing
is left before they read. Placing twice is harmless: a placed entry leaves the
intake in the same script.

ARGV[1] ordering    'aging' | 'strict'
ARGV[2] horizon_us

Reply: {how many tasks were placed (at most 500 a call), how many are left}.
]]
-- @include keys
-- @include intake_head
-- @include place_intake

local K = {prefix = KEYS[1], intake = KEYS[2], ring = KEYS[3], capped = KEYS[4],
  meta = KEYS[5], queued = KEYS[6]}
local entries = intake_head(K)
if #entries == 0 then return {0, 0} end
place_intake(K, ARGV[1], tonumber(ARGV[2]), entries)
return {#entries, redis.call('LLEN', K.intake)}
