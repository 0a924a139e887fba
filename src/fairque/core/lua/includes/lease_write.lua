-- @include keys
-- @include backlog_add
-- lease_write(K, picked, owners, charges, gtaken, capd, caps, worker, deadline, ms, fstart,
-- token, seens, group_backlogs): the write stage of a lease, for the tasks `picked`
-- (ids; `owners[i]` their users) that lease_tasks chose: each task's lease fields (its
-- token, counted on from `token`, the lease's `deadline`, its time-fair charge
-- `charges[i]` with the lease's start `fstart`, the group whose cap it holds slots of
-- `gtaken[i]`, and on a queue with caps (`caps`) whether it holds a slot of one,
-- `capd[i]`), the QUEUED and lease registries, the users' (and, with
-- `group_backlogs`, their groups') backlogs, and each user's last lease in 'active', to
-- within ACTIVE_STEP_MS (`seens`: the tenants' 'seen' as the loop read them). Each task's
-- 'waited' is how long it was ready before this lease (ms, from the QUEUED registry):
-- the process that leased it counts the wait (fairque.core.tally). Returns the leased
-- tasks (each the flat HGETALL of its hash) and the flat list of their (id, lease token)
-- pairs.
local ACTIVE_STEP_MS = 1000
-- the task's 'capped' field as a lease writes it: none on a queue without caps
local NO_FIELD, CAPPED, UNCAPPED = {}, {'capped', '1'}, {'capped', '0'}
local function lease_write(K, picked, owners, charges, gtaken, capd, caps, worker, deadline,
                           ms, fstart, token, seens, group_backlogs)
  local n = #picked
  -- when each task became ready: many members per command, in slices the Lua stack takes
  local ready_at
  if n == 1 then
    ready_at = {redis.call('ZSCORE', K.queued, picked[1])}
  else
    ready_at = {}
    for at = 1, n, 1000 do
      local got = redis.call('ZMSCORE', K.queued, unpack(picked, at, math.min(n, at + 999)))
      for i = 1, #got do ready_at[at + i - 1] = got[i] end
    end
  end
  local out, tokens, entries = {}, {}, {}
  for i, id in ipairs(picked) do
    token = token + 1
    local tk = task_key(K, id)
    local charge = charges[i]
    local waited = ready_at[i] and ms - ready_at[i] or 0
    -- on a queue with caps, 'capped' rides in the same write
    local cf = not caps and NO_FIELD or capd[i] and CAPPED or UNCAPPED
    if gtaken[i] then  -- it holds slots of its group's cap (group_release frees them)
      redis.call('HSET', tk, 'state', 'STARTED', 'lease', token, 'worker', worker,
        'deadline', deadline, 'started', ms, 'waited', waited, 'gheld', gtaken[i], unpack(cf))
      if charge then redis.call('HSET', tk, 'fair', charge .. ' ' .. fstart) end
    elseif charge then
      redis.call('HSET', tk, 'state', 'STARTED', 'lease', token, 'worker', worker,
        'deadline', deadline, 'started', ms, 'waited', waited, 'fair', charge .. ' ' .. fstart,
        unpack(cf))
    else
      redis.call('HSET', tk, 'state', 'STARTED', 'lease', token, 'worker', worker,
        'deadline', deadline, 'started', ms, 'waited', waited, unpack(cf))
    end
    out[i] = redis.call('HGETALL', tk)
    tokens[#tokens + 1] = id
    tokens[#tokens + 1] = token
    entries[#entries + 1] = deadline
    entries[#entries + 1] = id
  end
  for at = 1, n, 1000 do
    local last = math.min(n, at + 999)
    redis.call('ZREM', K.queued, unpack(picked, at, last))
    redis.call('ZADD', K.leases, unpack(entries, 2 * at - 1, 2 * last))
  end
  -- the leased tasks leave their users' backlogs
  local taken = {}
  for i = 1, n do
    local user = owners[i]
    taken[user] = (taken[user] or 0) + 1
  end
  -- (and their groups', on a queue that keeps them: meta 'group_backlogs')
  for user, c in pairs(taken) do backlog_add(K, user, -c, group_backlogs) end
  local seen = {}
  for user in pairs(taken) do
    local last = seens[user]
    if last == nil then last = redis.call('HGET', tenant_key(K, user), 'seen') end
    if not last or ms - last >= ACTIVE_STEP_MS then
      redis.call('HSET', tenant_key(K, user), 'seen', ms)
      seen[#seen + 1] = ms
      seen[#seen + 1] = user
    end
  end
  if #seen > 0 then redis.call('ZADD', K.active, unpack(seen)) end
  return out, tokens
end
