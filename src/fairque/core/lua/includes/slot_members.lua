-- slot_members(id, cost, score): the members a lease of task `id` holds in a held set
-- (its user's, a concurrency bucket's): one per slot it takes, so a count of the set's
-- unexpired members counts slots. A task of cost 1 (`cost` nil, false or 1) holds its
-- id; a task of cost N also holds N - 1 more: the id, a NUL and the slot's number (no
-- task id holds a control character). With `score`, the members come as ZADD takes
-- them, each after the score.
local function slot_members(id, cost, score)
  local out = {}
  local n = cost and cost + 0 or 1
  for k = 1, n do
    if score then out[#out + 1] = score end
    out[#out + 1] = k == 1 and id or id .. '\0' .. k
  end
  return out
end
