-- @include keys
-- @include lane_score
-- @include fair_join_tag
-- @include ring_count
-- place_intake(K, ordering, horizon_us, entries): put the intake's first `entries` (read
-- by the caller with intake_head: plain tasks pushed one at a time, oldest first) into
-- the QUEUED registry, the listing's indexes (by push time) and their users' lanes, and
-- those users into the ring by ring_join's rules. An entry is
-- '<push ms>\n<priority>\n<user>\n<name>\n<id>'; every entry is a QUEUED task (a cancel
-- takes its task's entry out). The push clock ('mono') goes on from each task's push time
-- in intake order, so a user's tasks keep their push order. The writes are one command
-- per key (the registry, each user's and name's index, each lane), one ZADD of the ring,
-- the queue's counters read and written once.
local function place_intake(K, ordering, horizon_us, entries)
  local n = #entries
  redis.call('LTRIM', K.intake, n, -1)
  local m = redis.call('HMGET', K.meta, 'mono', 'clock', 'fair', 'floor', 'joined', 'counted',
    'max_lead')
  local mono = (m[1] or 0) + 0
  local users, normal, critical, by_user = {}, {}, {}, {}
  local names, by_name, registry = {}, {}, {}
  for i = 1, n do
    local ms, prio, user, name, id = string.match(entries[i],
      '^(%d+)\n(%d)\n([^\n]*)\n([^\n]*)\n(.*)$')
    mono = math.max(ms * 1000, mono + 1)
    if not normal[user] then
      normal[user], critical[user], by_user[user] = {}, {}, {}
      users[#users + 1] = user
    end
    local index = by_name[name]
    if not index then
      index = {}
      by_name[name] = index
      names[#names + 1] = name
    end
    index[#index + 1] = ms
    index[#index + 1] = id
    index = by_user[user]
    index[#index + 1] = ms
    index[#index + 1] = id
    registry[#registry + 1] = ms
    registry[#registry + 1] = id
    if prio == '6' then
      local lane = critical[user]
      lane[#lane + 1] = id
    else
      local lane = normal[user]
      lane[#lane + 1] = lane_score(prio + 0, mono, ordering, horizon_us)
      lane[#lane + 1] = id
    end
  end
  redis.call('ZADD', K.queued, unpack(registry))
  for _, name in ipairs(names) do
    redis.call('ZADD', name_index_key(K, name), unpack(by_name[name]))
  end
  for _, user in ipairs(users) do
    redis.call('ZADD', user_index_key(K, user), unpack(by_user[user]))
    if #normal[user] > 0 then redis.call('ZADD', normal_key(K, user), unpack(normal[user])) end
    if #critical[user] > 0 then redis.call('RPUSH', critical_key(K, user), unpack(critical[user])) end
  end
  -- the users not in the ring and not held out by their cap join it
  local ranked, joining = redis.call('ZMSCORE', K.ring, unpack(users)), {}
  for i, user in ipairs(users) do
    if not ranked[i] and redis.call('SISMEMBER', K.capped, user) == 0 then
      joining[#joining + 1] = user
    end
  end
  if m[6] then
    for _, user in ipairs(joining) do ring_count(K, user, true) end
  end
  local joins, meta = {}, {'mono', string.format('%d', mono)}
  if fair_timed(m[3]) then
    local floor, joined = (m[4] or 0) + 0, (m[5] or -1) + 0
    local moved = false
    for _, user in ipairs(joining) do
      local tag, now_joined = fair_join_tag(K, user, floor, joined, m[7])
      if now_joined then joined, moved = now_joined, true end
      joins[#joins + 1] = string.format('%d', tag)
      joins[#joins + 1] = user
    end
    if moved then
      meta[3], meta[4] = 'joined', string.format('%d', joined)
    end
  else
    local clock = (m[2] or 0) + 0
    for _, user in ipairs(joining) do
      clock = clock + 1
      joins[#joins + 1] = clock
      joins[#joins + 1] = user
    end
    if #joins > 0 then meta[3], meta[4] = 'clock', clock end
  end
  if #joins > 0 then redis.call('ZADD', K.ring, unpack(joins)) end
  redis.call('HSET', K.meta, unpack(meta))
end
