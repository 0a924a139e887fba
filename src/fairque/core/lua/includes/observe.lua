-- observe(K, hist, values): add durations `values` (ms) to histogram `hist` ('wait' or
-- 'run') in the stats hash: field '<hist>:<i>' counts the values in bucket i (not
-- cumulative; bucket i holds values up to the i-th bound below, the last bucket the
-- rest) and '<hist>:sum_ms' their sum. One HINCRBY per bucket touched plus one for the
-- sum. The bounds are fairque.models.HISTOGRAM_BOUNDS_SECONDS in ms (a test holds
-- them equal).
local function observe(K, hist, values)
  local n = #values
  if n == 0 then return end
  local bounds = {5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000,
    300000, 900000, 3600000}
  local nb = #bounds
  if n == 1 then  -- the usual single task: no tally table
    local v = values[1]
    if v < 0 then v = 0 end
    local b = nb + 1
    for i = 1, nb do
      if v <= bounds[i] then b = i break end
    end
    redis.call('HINCRBY', K.stats, hist .. ':' .. b, 1)
    redis.call('HINCRBY', K.stats, hist .. ':sum_ms', v)
    return
  end
  local counts, sum = {}, 0
  for _, v in ipairs(values) do
    if v < 0 then v = 0 end
    local b = nb + 1
    for i = 1, nb do
      if v <= bounds[i] then b = i break end
    end
    counts[b] = (counts[b] or 0) + 1
    sum = sum + v
  end
  for b, c in pairs(counts) do redis.call('HINCRBY', K.stats, hist .. ':' .. b, c) end
  redis.call('HINCRBY', K.stats, hist .. ':sum_ms', sum)
end
