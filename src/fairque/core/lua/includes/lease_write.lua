-- @include keys
-- @include observe
-- @include backlog_add
-- lease_write(K, picked, owners, charges, gtaken, capd, caps, worker, deadline, ms, fstart,
-- token, seens, group_backlogs): the write stage of a lease, for the tasks `picked`
-- (ids; `owners[i]` their users) that lease_tasks chose: each task's lease fields (its
-- token, counted on from `token`, the lease's `deadline`, its time-fair charge
-- `charges[i]` with the lease's start `fstart`, the group whose cap it holds slots of
-- `gtaken[i]`, and on a queue with caps (`caps`) whether it holds a slot of one,
-- `capd[i]`), the QUEUED and lease registries, the users' (and, with
-- `group_backlogs`, their groups') backlogs, the wait histograms (queue and tenant) and
-- each user's last lease in 'active', to within ACTIVE_STEP_MS (`seens`: the tenants'
-- 'seen' as the loop read them). Returns the leased tasks (each the flat HGETALL of its
-- hash) and the flat list of their (id, lease token) pairs.
local ACTIVE_STEP_MS = 1000
-- the task's 'capped' field as a lease writes it: none on a queue without caps
local NO_FIELD, CAPPED, UNCAPPED = {}, {'capped', '1'}, {'capped', '0'}
local function lease_write(K, picked, owners, charges, gtaken, capd, caps, worker, deadline,
                           ms, fstart, token, seens, group_backlogs)
  local n = #picked
  local out, tokens, waits, entries, by_user = {}, {}, {}, {}, {}
  for i, id in ipairs(picked) do
    token = token + 1
    local tk = task_key(K, id)
    local charge = charges[i]
    -- on a queue with caps, 'capped' rides in the same write
    local cf = not caps and NO_FIELD or capd[i] and CAPPED or UNCAPPED
    if gtaken[i] then  -- it holds slots of its group's cap (group_release frees them)
      redis.call('HSET', tk, 'state', 'STARTED', 'lease', token, 'worker', worker,
        'deadline', deadline, 'started', ms, 'gheld', gtaken[i], unpack(cf))
      if charge then redis.call('HSET', tk, 'fair', charge .. ' ' .. fstart) end
    elseif charge then
      redis.call('HSET', tk, 'state', 'STARTED', 'lease', token, 'worker', worker,
        'deadline', deadline, 'started', ms, 'fair', charge .. ' ' .. fstart, unpack(cf))
    else
      redis.call('HSET', tk, 'state', 'STARTED', 'lease', token, 'worker', worker,
        'deadline', deadline, 'started', ms, unpack(cf))
    end
    out[i] = redis.call('HGETALL', tk)
    tokens[#tokens + 1] = id
    tokens[#tokens + 1] = token
    entries[#entries + 1] = deadline
    entries[#entries + 1] = id
  end
  -- many members per command, in slices the Lua stack takes
  for at = 1, n > 1 and n or 0, 1000 do
    local last = math.min(n, at + 999)
    local ready_at = redis.call('ZMSCORE', K.queued, unpack(picked, at, last))
    for i = 1, last - at + 1 do
      if ready_at[i] then
        local v = ms - ready_at[i]
        waits[#waits + 1] = v
        local user = owners[at + i - 1]
        local mine = by_user[user]
        if mine then mine[#mine + 1] = v else by_user[user] = {v} end
      end
    end
    redis.call('ZREM', K.queued, unpack(picked, at, last))
    redis.call('ZADD', K.leases, unpack(entries, 2 * at - 1, 2 * last))
  end
  if n == 1 then
    local ready_at = redis.call('ZSCORE', K.queued, picked[1])
    if ready_at then
      waits[1] = ms - ready_at
      by_user[owners[1]] = waits
      redis.call('ZREM', K.queued, picked[1])
    end
    redis.call('ZADD', K.leases, deadline, picked[1])
  end
  redis.call('HINCRBY', K.stats, 'popped', n)
  -- the leased tasks leave their users' backlogs
  local taken = {}
  for i = 1, n do
    local user = owners[i]
    taken[user] = (taken[user] or 0) + 1
  end
  -- (and their groups', on a queue that keeps them: meta 'group_backlogs')
  for user, c in pairs(taken) do backlog_add(K, user, -c, group_backlogs) end
  observe(K, 'wait_ms', waits)
  local seen = {}
  for user, values in pairs(by_user) do
    local tk = tenant_key(K, user)
    observe(K, 'wait_ms', values, tk)
    local last = seens[user]
    if last == nil then last = redis.call('HGET', tk, 'seen') end
    if not last or ms - last >= ACTIVE_STEP_MS then
      redis.call('HSET', tk, 'seen', ms)
      seen[#seen + 1] = ms
      seen[#seen + 1] = user
    end
  end
  if #seen > 0 then redis.call('ZADD', K.active, unpack(seen)) end
  return out, tokens
end
