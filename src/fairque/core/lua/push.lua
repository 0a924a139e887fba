#!lua
--[[
push: enqueue one or more tasks atomically (a batch is all or nothing). One plain task
(no dependencies, delay, due time, timeout or constraint buckets) takes push_one.lua.

A task ready at once goes into its user's lane, or, while the intake holds tasks pushed
one at a time (push_one.lua), behind them in the intake: a push never overtakes them.

A task with dependencies waits in DEFERRED until every upstream task FINISHED;
an upstream already FINISHED counts as satisfied. Upstream ids must exist or be
pushed in the same batch (the client orders a batch so upstreams come first and
rejects cycles before calling). An upstream already FAILED or CANCELED cancels the
new task at once, unless it chose on_dep_fail='wait'.

Every id is looked up first: a push of an id that exists (or ended within the last
minute: its tombstone, see finalize) is a no-op that returns the stored task, so a
resent push never writes a task twice.

A task with a dedup key merges into the task its user has waiting with that key
(QUEUED, SCHEDULED or DEFERRED; the dedup hash names it, and a task it names that no
longer waits is no longer a match), or into an earlier task of the batch with that
key; it is not created. By its mode: 'keep' changes nothing; 'replace' gives the
waiting task its payload; 'debounce' gives it its payload and moves a SCHEDULED (or
DEFERRED) task's start to now + window, never past its creation + max wait (a
debounced task with no due time of its own starts a window after its push). A merge
records the request for a minute (fetch_key: 'merged'): a resent push merges nothing
again, whatever other pushes merged in between. A task
that holds a key is named in the dedup hash; maintain drops names of tasks that no
longer wait.

ARGV[1] ordering    'aging' | 'strict'
ARGV[2] horizon_us  aging horizon in microseconds
ARGV[3] on_dup      'return' (existing task is a no-op) | 'error' (DuplicateTask, except
                    for a resend of the push that created it)
ARGV[4] n           number of tasks; then 17 values per task:
        id, user, name, payload, prio (1..6), max_retries, delay_ms (-1 none),
        run_at_ms (-1 none), timeout_ms (-1 none), keep_result (0|1), result_ttl_ms,
        deps (JSON array of task ids, '' for none), on_dep_fail ('cancel'|'wait'),
        cons (JSON array of the constraint buckets the task counts in, '' for none),
        cost (the slots and tokens it takes: '1', or more; a task of cost 1 stores no
        'cost' field, one of more marks the queue 'costly' in its meta, so the lease
        path reads costs only where there are some),
        dedup ('' or '<mode> <window ms> <max wait ms> <key>': see below),
        trace ('' or the W3C traceparent of the span that pushed it)
ARGV[5] failed_ttl_ms  how long a task canceled at push stays readable
ARGV[6] req         request id (unique per call; the same when a call is resent). It is
                    kept in the task's 'pushed' field, so a resend of the push that
                    created a task still answers "created" (0 or 1 in {1, ...} below)
ARGV[7] cver        the constraints version the client matched the tasks against
ARGV[8] max_queued  the queue's default backlog quota per user ('0': none)
  (the per-task values start at ARGV[9])
ARGV[9 + 17n] max_bytes  the queue's default byte quota per user ('0' or absent: none)

Reply: one entry per task: {0, state, created_ms} for a new task,
       {1, <HGETALL of the existing task>, mine} for an id that already exists (mine:
       1 when this same request created it, i.e. this call is a resend, else 0) and
       for a task merged into the one waiting with its dedup key (mine: 0), or
       {2, state} for an id whose task ended and expired within the last minute.
Errors: 'FQERR -32' (StaleConstraints) when the queue's constraints changed since the
        client read them (it reloads them and pushes again); 'FQERR -3 <id>' (DuplicateTask) when on_dup is 'error'; 'FQERR -5'
        (DependencyNotFound) for an unknown upstream id; 'FQERR -34 <quota> <backlog> <user>'
        (QuotaExceeded) when the batch's new tasks would take a user's backlog past its
        quota ('... <user>\t<group>': its group's backlog past the group's quota);
        'FQERR -35 <quota> <bytes> <user>' (QuotaExceeded) when their payloads would take
        the bytes a user's tasks that have not ended hold past its byte quota (its own,
        quotas '<user>\0b', else the queue's default). Nothing is written then.
]]
-- @include now
-- @include keys
-- @include lane_score
-- @include signal_wake
-- @include ring_join
-- @include finalize
-- @include sadd_all
-- @include add_all
-- @include stored_entry
-- @include due_by
-- @include task_stock
-- @include bytes_add

local K = {prefix = KEYS[1], ring = KEYS[2], delayed = KEYS[3], queued = KEYS[4],
  deferred = KEYS[5], canceled = KEYS[6], meta = KEYS[7], stats = KEYS[8], capped = KEYS[9],
  wake = KEYS[10], ends = KEYS[11], constraints = KEYS[12], intake = KEYS[13],
  backlog = KEYS[14], quotas = KEYS[15], dedup = KEYS[16]}

-- numbers are read with Lua's string coercion (x + 0), cheaper than tonumber
local ordering, horizon_us, on_dup = ARGV[1], ARGV[2] + 0, ARGV[3]
local n, failed_ttl_ms, req = ARGV[4] + 0, ARGV[5] + 0, ARGV[6]
local W, B = 17, 9
if (redis.call('HGET', K.constraints, '~version') or '0') ~= ARGV[7] then
  return redis.error_reply('FQERR -32 constraints changed')
end

local in_batch = {}
for i = 0, n - 1 do in_batch[ARGV[B + i * W]] = true end

-- validate everything before the first write
local existing = {}
-- the new tasks per user, for the quotas (a resent task is not new)
local adding, adders = {}, {}
-- dedup: the task each merging push merges into, the key's holder in this batch, and
-- whether this request merged before (a resend: it merges nothing again; nil: not read)
local merge, holder, merged_before = {}, {}, nil
local merged = false  -- this request merged a payload (its record is kept for a resend)
for i = 0, n - 1 do
  local b = B + i * W
  local id = ARGV[b]
  local tk = task_key(K, id)
  local exists = redis.call('EXISTS', tk, gone_key(K, id)) > 0
  existing[id] = exists
  if not exists and ARGV[b + 15] ~= '' then
    local field = ARGV[b + 1] .. '\0' .. string.match(ARGV[b + 15], '^%S+ %S+ %S+ (.*)$')
    local target = holder[field]
    if not target then
      local named = redis.call('HGET', K.dedup, field)
      if named then
        local state = redis.call('HGET', task_key(K, named), 'state')
        if state == 'QUEUED' or state == 'SCHEDULED' or state == 'DEFERRED' then
          target = named
          if merged_before == nil then
            merged_before = redis.call('EXISTS', fetch_key(K, req)) == 1
          end
        end
      end
    end
    if target then merge[id] = target else holder[field] = id end
  end
  if not exists and not merge[id] then
    local user = ARGV[b + 1]
    if not adding[user] then adding[user] = 0; adders[#adders + 1] = user end
    adding[user] = adding[user] + 1
  end
  if exists and on_dup == 'error' and redis.call('HGET', tk, 'pushed') ~= req then
    return redis.error_reply('FQERR -3 task ' .. id .. ' already exists')
  end
  if not exists and ARGV[b + 11] ~= '' then
    for _, up in ipairs(cjson.decode(ARGV[b + 11])) do
      if not in_batch[up] and redis.call('EXISTS', task_key(K, up)) == 0 then
        return redis.error_reply('FQERR -5 task ' .. id .. ' depends on unknown task ' .. up)
      end
    end
  end
end

-- the users' backlogs, read once (and written once, after the loop); their own quotas
-- in one more read when some user has one
local queued, own = {}, {}
local has_own = #adders > 0 and redis.call('EXISTS', K.quotas) == 1
for at = 1, #adders, 2000 do  -- in pieces Lua's unpack() takes
  local last = math.min(#adders, at + 1999)
  local got = redis.call('HMGET', K.backlog, unpack(adders, at, last))
  for i = 1, #got do queued[at + i - 1] = got[i] end
  if has_own then
    got = redis.call('HMGET', K.quotas, unpack(adders, at, last))
    for i = 1, #got do own[at + i - 1] = got[i] end
  end
end
for i, user in ipairs(adders) do
  local quota = own[i] or ARGV[8]
  queued[i] = queued[i] or '0'
  if quota ~= '0' and queued[i] + adding[user] > quota + 0 then
    return redis.error_reply('FQERR -34 ' .. quota .. ' ' .. queued[i] .. ' ' .. user)
  end
end
-- a queue that keeps its groups' backlogs (set_group_limits marks the quotas): the new
-- tasks join their users' groups' backlogs too, each held to its group's quota
local in_group = {}
if has_own and redis.call('HEXISTS', K.quotas, '\0groups') == 1 then
  local gadd, gfirst = {}, {}
  for _, user in ipairs(adders) do
    local group = redis.call('HGET', tenant_key(K, user), 'group')
    if group then
      in_group[user] = group
      if not gadd[group] then gadd[group] = 0; gfirst[group] = user end
      gadd[group] = gadd[group] + adding[user]
    end
  end
  for group, add in pairs(gadd) do
    local g = redis.call('HMGET', group_key(K, group), 'backlog', 'quota')
    if g[2] and (g[1] or 0) + add > g[2] + 0 then
      return redis.error_reply('FQERR -34 ' .. g[2] .. ' ' .. (g[1] or '0') .. ' '
        .. gfirst[group] .. '\t' .. group)
    end
  end
end

-- byte quotas: the payload bytes of a user's tasks that have not ended, held to its own
-- quota or the queue's default; a new task of a user under one records its bytes
local max_bytes = ARGV[B + n * W] or '0'
local counted, add_bytes = {}, {}
if #adders > 0 and (max_bytes ~= '0' or has_own) then
  for i = 0, n - 1 do
    local b = B + i * W
    if not existing[ARGV[b]] and not merge[ARGV[b]] then
      add_bytes[ARGV[b + 1]] = (add_bytes[ARGV[b + 1]] or 0) + #ARGV[b + 3]
    end
  end
  for _, user in ipairs(adders) do
    local quota = has_own and redis.call('HGET', K.quotas, user .. '\0b') or max_bytes
    if quota ~= '0' then
      local used = redis.call('HGET', K.backlog, user .. '\0b') or '0'
      if used + add_bytes[user] > quota + 0 then
        return redis.error_reply('FQERR -35 ' .. quota .. ' ' .. used .. ' ' .. user)
      end
      counted[user] = true
    end
  end
  -- (counted now: a task canceled at push below stops counting as it ends)
  for user in pairs(counted) do bytes_add(K, user, add_bytes[user]) end
end

local ms, us = now()
-- A ready task's lane, registry and index entries are gathered per key and written
-- after the loop, one command per key rather than per task: a batch of 1,000 plain
-- tasks costs about 2,000 commands instead of 13,000. (A task that is not plain
-- writes its indexes at once: finalize may unindex it again in the same loop.)
local adds, add_order = {}, {}
local function gather(command, key, score, member)
  local values = adds[key]
  if not values then
    values = {}
    adds[key] = values
    add_order[#add_order + 1] = {command, key}
  end
  if score then values[#values + 1] = score end
  values[#values + 1] = member
end
-- the queue's microsecond clock (see mono_us), read once at the first ready task
local clock = nil
local ring_users, in_ring = {}, {}
-- whether the intake holds tasks (read at the first ready task): ready tasks then join it
local behind = nil
local first_due = nil  -- the earliest due time of the tasks scheduled here
local reply = {}
local ready, created = 0, 0
local costly = false  -- a new task of cost > 1 (see the 'cost' value)
for i = 0, n - 1 do
  local b = B + i * W
  local id, user, name, payload = ARGV[b], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3]
  local prio, max_retries = ARGV[b + 4] + 0, ARGV[b + 5]
  -- '-1' (none), the usual value, is recognised as text: a conversion costs more
  local delay_ms, run_at_ms, timeout_ms = ARGV[b + 6], ARGV[b + 7], ARGV[b + 8]
  delay_ms = delay_ms == '-1' and -1 or tonumber(delay_ms)
  run_at_ms = run_at_ms == '-1' and -1 or tonumber(run_at_ms)
  timeout_ms = timeout_ms == '-1' and -1 or tonumber(timeout_ms)
  local keep, ttl = ARGV[b + 9], ARGV[b + 10]
  local deps, on_dep_fail, cons, cost = ARGV[b + 11], ARGV[b + 12], ARGV[b + 13], ARGV[b + 14]
  local tk = task_key(K, id)
  local dedup = ARGV[b + 15]
  if merge[id] then
    local target = merge[id]
    local ttk = task_key(K, target)
    local mode, win, most = string.match(dedup, '^(%S+) (%S+) (%S+)')
    if mode ~= 'keep' and not merged_before then
      redis.call('HSET', ttk, 'payload', payload)
      merged = true
      local had = redis.call('HGET', ttk, 'bytes')
      if had then  -- counted against its user's byte quota: as its new payload
        bytes_add(K, user, #payload - had)
        redis.call('HSET', ttk, 'bytes', #payload)
      end
      local f = redis.call('HMGET', ttk, 'state', 'created')
      if mode == 'debounce' and f[1] ~= 'QUEUED' then
        local start = math.min(ms + win, f[2] + most)
        redis.call('HSET', ttk, 'run_at', start)
        if f[1] == 'SCHEDULED' then redis.call('ZADD', K.delayed, start, target) end
      end
    end
    reply[#reply + 1] = {1, redis.call('HGETALL', ttk), 0}
  elseif existing[id] then
    reply[#reply + 1] = stored_entry(K, id, req)
  else
    local due = -1
    if run_at_ms >= 0 then due = run_at_ms elseif delay_ms >= 0 then due = ms + delay_ms end
    if due < 0 and string.sub(dedup, 1, 9) == 'debounce ' then
      due = ms + string.match(dedup, '^%S+ (%S+)')  -- a debounce starts a window later
    end
    -- the common task (no dependencies, due now) is written whole in one command
    local plain = deps == '' and due <= ms
    -- (a stock task leaves four fields out: see task_stock)
    local stock = task_stock(ARGV[b + 4], max_retries, keep, ttl)
    local trace = ARGV[b + 16]
    if plain and stock and timeout_ms < 0 and cons == '' and cost == '1' and dedup == ''
        and trace == '' and not counted[user] then
      redis.call('HSET', tk, 'id', id, 'user', user, 'name', name, 'payload', payload,
        'created', ms, 'state', 'QUEUED', 'pushed', req)
    else
      local fields = {'id', id, 'user', user, 'name', name, 'payload', payload,
        'created', ms}
      if not stock then
        fields[11], fields[12], fields[13], fields[14] = 'prio', prio, 'max_retries', max_retries
        fields[15], fields[16], fields[17], fields[18] = 'keep_result', keep, 'result_ttl', ttl
      end
      if plain then fields[#fields + 1] = 'state'; fields[#fields + 1] = 'QUEUED' end
      if timeout_ms >= 0 then fields[#fields + 1] = 'timeout'; fields[#fields + 1] = timeout_ms end
      if cons ~= '' then fields[#fields + 1] = 'cons'; fields[#fields + 1] = cons end
      if cost ~= '1' then
        fields[#fields + 1] = 'cost'; fields[#fields + 1] = cost
        costly = true
      end
      if dedup ~= '' then fields[#fields + 1] = 'dedup'; fields[#fields + 1] = dedup end
      if trace ~= '' then fields[#fields + 1] = 'trace'; fields[#fields + 1] = trace end
      if counted[user] then fields[#fields + 1] = 'bytes'; fields[#fields + 1] = #payload end
      fields[#fields + 1] = 'pushed'; fields[#fields + 1] = req
      redis.call('HSET', tk, unpack(fields))
    end
    -- the listing's indexes, by creation time (see list_tasks)
    if plain then
      gather('ZADD', user_index_key(K, user), ms, id)
      gather('ZADD', name_index_key(K, name), ms, id)
    else
      redis.call('ZADD', user_index_key(K, user), ms, id)
      redis.call('ZADD', name_index_key(K, name), ms, id)
    end
    if due > ms then redis.call('HSET', tk, 'run_at', due) end
    -- dependencies: which upstreams are still pending, and did one already fail?
    local pending, dead = {}, nil
    if deps ~= '' then
      redis.call('HSET', tk, 'deps', deps, 'on_dep_fail', on_dep_fail)
      for _, up in ipairs(cjson.decode(deps)) do
        local st = redis.call('HGET', task_key(K, up), 'state')
        if st == 'FAILED' or st == 'CANCELED' then
          if on_dep_fail == 'wait' then pending[#pending + 1] = up else dead = dead or (up .. ' is ' .. st) end
        elseif st ~= 'FINISHED' then
          pending[#pending + 1] = up
        end
      end
    end
    local state
    if dead then
      state = 'CANCELED'
      redis.call('HSET', tk, 'error', 'dependency ' .. dead)
      finalize(K, id, 'CANCELED', K.canceled, ms, failed_ttl_ms, 'canceled')
    elseif #pending > 0 then
      state = 'DEFERRED'
      redis.call('HSET', tk, 'state', state)
      redis.call('ZADD', K.deferred, ms, id)
      sadd_all(deps_waiting_key(K, id), pending)
      for _, up in ipairs(pending) do
        local bk = deps_blocked_key(K, up)
        redis.call('SADD', bk, id)
        -- an upstream that already ended keeps its set only as long as its own data
        local up_ttl = redis.call('PTTL', task_key(K, up))
        if up_ttl > 0 then redis.call('PEXPIRE', bk, up_ttl) end
      end
    elseif due > ms then
      state = 'SCHEDULED'
      redis.call('HSET', tk, 'state', state)
      redis.call('ZADD', K.delayed, due, id)
      if not first_due or due < first_due then first_due = due end
      ready = ready + 1  -- idle workers must shorten their wait to the new due time
    else
      -- QUEUED: into the user's lane (critical list or normal sorted set), as
      -- enqueue_ready does, gathered
      state = 'QUEUED'
      if not plain then redis.call('HSET', tk, 'state', state) end
      if behind == nil then behind = redis.call('LLEN', K.intake) > 0 end
      if behind then
        -- tasks pushed one at a time wait in the intake: go behind them, never ahead
        gather('RPUSH', K.intake, nil,
          ms .. '\n' .. prio .. '\n' .. user .. '\n' .. name .. '\n' .. id)
      else
        if clock then
          clock = clock + 1
        else
          clock = math.max(us, (redis.call('HGET', K.meta, 'mono') or 0) + 1)
        end
        if prio >= 6 then
          gather('RPUSH', critical_key(K, user), nil, id)
        else
          gather('ZADD', normal_key(K, user), lane_score(prio, clock, ordering, horizon_us), id)
        end
        if not in_ring[user] then
          in_ring[user] = true
          ring_users[#ring_users + 1] = user
        end
        gather('ZADD', K.queued, ms, id)
      end
      ready = ready + 1
    end
    created = created + 1
    if state == 'CANCELED' then
      adding[user] = adding[user] - 1
    elseif dedup ~= '' then  -- it holds its key while it waits
      redis.call('HSET', K.dedup, user .. '\0' .. string.match(dedup, '^%S+ %S+ %S+ (.*)$'), id)
    end
    reply[#reply + 1] = {0, state, ms}
  end
end
for _, entry in ipairs(add_order) do add_all(entry[1], entry[2], adds[entry[2]]) end
if clock then redis.call('HSET', K.meta, 'mono', clock) end
if costly then redis.call('HSET', K.meta, 'costly', '1') end
if first_due then due_by(K, first_due) end
for _, user in ipairs(ring_users) do ring_join(K, user) end
if created > 0 then redis.call('HINCRBY', K.stats, 'pushed', created) end
local counts = {}
for i, user in ipairs(adders) do
  if adding[user] > 0 then
    counts[#counts + 1] = user
    counts[#counts + 1] = queued[i] + adding[user]
  end
end
add_all('HSET', K.backlog, counts)
for user, group in pairs(in_group) do
  if adding[user] > 0 then redis.call('HINCRBY', group_key(K, group), 'backlog', adding[user]) end
end
-- one token per ready (or newly scheduled) task, bounded, wakes as many idle workers
if ready > 0 then signal_wake(K, ready) end
if merged then redis.call('SET', fetch_key(K, req), 'merged', 'PX', 60000) end
return reply
