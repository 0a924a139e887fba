-- @include keys
-- @include fair_timed
-- fair_join_tag(K, user, floor, joined, lead): the start tag of a user (re)joining the
-- ring, and the queue's new 'joined' (meta: the tag the last user joined at) or nil when
-- it stays. A user that owes time rejoins at its saved tag (at most `lead`, meta
-- 'max_lead' or nil for FAIR_LEAD, ahead of the floor); any other at the floor (idle time earns nothing), behind the users that
-- joined there before it (FAIR_STEP after the last of them), so users that join
-- together are served in the order they joined, as in count mode.
local function fair_join_tag(K, user, floor, joined, lead)
  local saved = tonumber(redis.call('HGET', tenant_key(K, user), 'tag') or '-1')
  if saved > floor then
    local tag = math.min(saved, floor + (tonumber(lead) or FAIR_LEAD))
    if tag > joined then return tag, nil end
  end
  local tag = math.max(floor, joined + FAIR_STEP)
  return tag, tag
end
