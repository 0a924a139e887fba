-- least_served(ring, users): the user of `users` that has waited longest in the
-- ring (lowest score), or nil when none of them has ready work.
local function least_served(ring, users)
  if #users == 0 then return nil end
  local scores = redis.call('ZMSCORE', ring, unpack(users))
  local best, best_score = nil, nil
  for i = 1, #users do
    local s = scores[i]
    if s then
      s = tonumber(s)
      if not best_score or s < best_score then best, best_score = users[i], s end
    end
  end
  return best
end
