-- @include least_served
-- pick_user(ring, assigned, steal, any): whose task to lease next. The least
-- recently served of `assigned` users with ready work; when none has, the least
-- recently served of `steal` users (the ring's head when `any`); with neither
-- list, the ring's head. nil when nobody eligible has ready work.
local function pick_user(ring, assigned, steal, any)
  if #assigned > 0 then
    local u = least_served(ring, assigned)
    if u or (#steal == 0 and not any) then return u end
  end
  if any or #steal == 0 then
    return redis.call('ZRANGE', ring, 0, 0)[1]
  end
  return least_served(ring, steal)
end
