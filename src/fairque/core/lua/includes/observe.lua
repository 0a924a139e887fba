-- observe(K, hist, values, into): add durations `values` (ms) to histogram `hist`
-- ('wait_ms' or 'run_ms') in the stats hash (or the hash `into`): field '<hist>:<i>'
-- counts the values in bucket i (not cumulative) and '<hist>:sum' their sum (whole ms,
-- rounded: a measured run may hold fractions). The bounds
-- grow by a factor 2^(1/4): bucket 1 holds values up to 1 ms, bucket i (2..NB) those
-- above 2^((i-2)/4) ms and up to 2^((i-1)/4) ms, bucket NB + 1 the rest (above 2^22 ms,
-- 70 minutes). A bucket is found by one logarithm, not a scan.
-- fairque.models.HISTOGRAM_BOUNDS_SECONDS are the same bounds in seconds (a test holds
-- NB and the factor equal). One HINCRBY per bucket touched plus one for the sum.
local OBSERVE_NB = 89
local OBSERVE_STEPS = 4 / math.log(2)

local function observe(K, hist, values, into)
  local n = #values
  if n == 0 then return end
  into = into or K.stats
  local counts, sum = nil, 0
  for i = 1, n do
    local v = values[i]
    if v < 0 then v = 0 end
    local b = 1
    if v > 1 then
      -- the epsilon keeps a value on a bound (2, 4, 8 ms ...) in the bucket it closes
      b = math.ceil(math.log(v) * OBSERVE_STEPS - 1e-9) + 1
      if b > OBSERVE_NB then b = OBSERVE_NB + 1 end
    end
    if n == 1 then  -- the usual single task: no tally table
      redis.call('HINCRBY', into, hist .. ':' .. b, 1)
      redis.call('HINCRBY', into, hist .. ':sum', math.floor(v + 0.5))
      return
    end
    counts = counts or {}
    counts[b] = (counts[b] or 0) + 1
    sum = sum + v
  end
  for b, c in pairs(counts) do redis.call('HINCRBY', into, hist .. ':' .. b, c) end
  redis.call('HINCRBY', into, hist .. ':sum', math.floor(sum + 0.5))
end
