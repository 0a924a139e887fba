-- share_bound(weight, bounds, total): `weight` held within its share of `total`, the
-- ring's top-level weights: `bounds` is '<floor> <ceiling>' (fractions; 0 and 1 for
-- none). Below its floor, the weight that makes its part of `total` the floor; above
-- its ceiling, the one that makes it the ceiling. Alone (nothing else in `total`) a
-- weight stays as it is: nobody waits, so a ceiling does not hold it back.
local function share_bound(weight, bounds, total)
  local floor, ceiling = string.match(bounds, '^(%S+) (%S+)$')
  floor, ceiling = tonumber(floor), tonumber(ceiling)
  local others = total - weight
  if others <= 0 then return weight end
  local part = weight / (weight + others)
  if part < floor then return floor * others / (1 - floor) end
  if part > ceiling then return ceiling * others / (1 - ceiling) end
  return weight
end
