-- @include fair_timed
-- bound_lead(K, limit): in time mode, bring up to `limit` users of the ring that are
-- more than the queue's lead bound (meta 'max_lead', virtual us; FAIR_LEAD when unset)
-- ahead of the floor back to it, so that no fault charged to a tenant (a hung handler's
-- heartbeats, a batch of reclaimed leases) keeps it waiting longer than the bound once
-- the fault stops. What it trades: worker time a tenant really used past the bound is
-- forgiven. Run by the periodic scripts (maintain, reclaim), never by a lease. Returns
-- how many users it moved.
local function bound_lead(K, limit)
  local m = redis.call('HMGET', K.meta, 'fair', 'floor', 'max_lead')
  if not fair_timed(m[1]) then return 0 end
  local most = tonumber(m[2] or '0') + (tonumber(m[3]) or FAIR_LEAD)
  local over = redis.call('ZRANGEBYSCORE', K.ring, '(' .. most, '+inf', 'LIMIT', 0, limit)
  if #over == 0 then return 0 end
  local moves = {}
  for _, user in ipairs(over) do
    moves[#moves + 1] = string.format('%d', most)
    moves[#moves + 1] = user
  end
  redis.call('ZADD', K.ring, 'XX', unpack(moves))
  return #over
end
