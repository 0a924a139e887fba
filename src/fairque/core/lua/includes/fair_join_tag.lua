-- @include keys
-- @include fair_timed
-- fair_join_tag(K, user, floor, joined, lead, held_out): the start tag of a user
-- (re)joining the ring, and the queue's new 'joined' (meta: the tag the last user joined
-- at) or nil when it stays. A user that owes time rejoins at its saved tag (at most
-- `lead`, meta 'max_lead' or nil for FAIR_LEAD, ahead of the floor). A user its own
-- in-flight cap of `held_out` slots held out (nil: it was idle) rejoins at its saved
-- tag too, at most `held_out` times its run estimate behind the floor (a cap of its
-- tasks, at weight 1; never more than the lead bound): the time its cap held it out
-- earns that much, so the slots its cap frees together go to it, not to the users at
-- the floor. Any other user rejoins at the floor (idle time earns nothing), behind the
-- users that joined there before it (FAIR_STEP after the last of them), so users that
-- join together are served in the order they joined, as in count mode.
local function fair_join_tag(K, user, floor, joined, lead, held_out)
  local tk = tenant_key(K, user)
  local saved = tonumber(redis.call('HGET', tk, 'tag') or '-1')
  local bound = tonumber(lead) or FAIR_LEAD
  if held_out and saved >= 0 and saved < floor then
    local est = tonumber(redis.call('HGET', tk, 'est') or '0')
    local credit = math.min(math.floor(held_out * est * 1000), bound)
    if credit > 0 then return math.max(saved, floor - credit), nil end
  end
  if saved > floor then
    local tag = math.min(saved, floor + bound)
    if tag > joined then return tag, nil end
  end
  local tag = math.max(floor, joined + FAIR_STEP)
  return tag, tag
end
