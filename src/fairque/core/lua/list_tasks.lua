#!lua flags=allow-oom
--[[
list_tasks: one page of a queue's tasks, newest first, with a cursor to the next page.

"Newest first" means: with a state, by that state's registry time (SCHEDULED by due
time, DEFERRED by push time, QUEUED by the time it became ready, STARTED by lease
deadline, FINISHED/FAILED/CANCELED by expiry: end time plus the task's TTL, so end
order when the TTLs are equal); without a state, by creation time. Ties go by id,
descending. The walk is chosen per page:
- a state alone ('s'): its registry, from the cursor.
- a user and/or a name without a state ('u', 'n'): the smaller of the user's and the
  name's index (every task in any state, by creation time), each entry checked.
- a state with a user and/or a name: when the state's registry or the smaller index
  holds at most `scan` tasks ('r'), that set is read whole, filtered and ordered (an
  index's entries take their registry score); else the registry is walked ('s'),
  each entry checked.
A checked walk examines at most `scan` entries a page, so a page may hold fewer
tasks than asked for (even none) and still have a next cursor. A cursor names the walk,
the order score and the id of the last entry examined; the next page resumes right
after it (found by rank), or, if it has left its set since, after its (score, id) in the
same order, so a task sharing its score is not skipped.

ARGV[1] state       a TaskState value, or '' for any (then user or name is given)
ARGV[2] user        '' for any
ARGV[3] name        '' for any
ARGV[4] limit       tasks per page
ARGV[5] scan        entries one page examines at most
ARGV[6] walk        the cursor's walk ('s', 'u', 'n', 'r'), '' for the first page
ARGV[7] score       the cursor's score
ARGV[8] id          the cursor's task id

Reply: {tasks (each the flat HGETALL of its hash), next walk, next score, next id};
       the next walk is '' when nothing follows.
]]
-- @include keys

local K = {prefix = KEYS[1], delayed = KEYS[2], deferred = KEYS[3], queued = KEYS[4],
  leases = KEYS[5], finished = KEYS[6], failed = KEYS[7], canceled = KEYS[8]}
local state, user, name = ARGV[1], ARGV[2], ARGV[3]
local limit, scan = tonumber(ARGV[4]), tonumber(ARGV[5])
local walk, after_score, after_id = ARGV[6], tonumber(ARGV[7]) or 0, ARGV[8]
local registries = {SCHEDULED = K.delayed, DEFERRED = K.deferred, QUEUED = K.queued,
  STARTED = K.leases, FINISHED = K.finished, FAILED = K.failed, CANCELED = K.canceled}
local registry = registries[state]

local function matches(f)
  return f[1] and (state == '' or f[1] == state) and (user == '' or f[2] == user)
    and (name == '' or f[3] == name)
end

local out = {}

local filtered = user ~= '' or name ~= ''
local index
if filtered then
  if user ~= '' and name ~= '' then
    if walk == 'u' or walk == 'n' then
      index = walk == 'u' and user_index_key(K, user) or name_index_key(K, name)
    else
      local ui, ni = user_index_key(K, user), name_index_key(K, name)
      index = redis.call('ZCARD', ui) <= redis.call('ZCARD', ni) and ui or ni
    end
  else
    index = user ~= '' and user_index_key(K, user) or name_index_key(K, name)
  end
end

-- 'r': a state with a filter whose registry or index is small: read it whole
if registry and filtered then
  local n_index, n_registry = redis.call('ZCARD', index), redis.call('ZCARD', registry)
  if math.min(n_index, n_registry) <= scan then
    local found = {}
    if n_index <= n_registry then
      for _, id in ipairs(redis.call('ZRANGE', index, 0, -1)) do
        local score = redis.call('ZSCORE', registry, id)
        if score and matches(redis.call('HMGET', task_key(K, id), 'state', 'user', 'name')) then
          found[#found + 1] = {tonumber(score), id}
        end
      end
    else
      local all = redis.call('ZRANGE', registry, 0, -1, 'WITHSCORES')
      for i = 1, #all, 2 do
        if matches(redis.call('HMGET', task_key(K, all[i]), 'state', 'user', 'name')) then
          found[#found + 1] = {tonumber(all[i + 1]), all[i]}
        end
      end
    end
    table.sort(found, function(a, b) return a[1] > b[1] or (a[1] == b[1] and a[2] > b[2]) end)
    local last
    for _, e in ipairs(found) do
      if walk == '' or e[1] < after_score or (e[1] == after_score and e[2] < after_id) then
        if #out == limit then return {out, 'r', last[1], last[2]} end
        out[#out + 1] = redis.call('HGETALL', task_key(K, e[2]))
        last = e
      end
    end
    return {out, '', '', ''}
  end
end

-- 's', 'u', 'n': walk one sorted set from the cursor, newest first
local key
if registry then
  walk, key = 's', registry
else
  key = index
  walk = (user ~= '' and index == user_index_key(K, user)) and 'u' or 'n'
end

-- where to resume: by rank when the cursor's entry is still there, else by score
local rank, offset = 0, nil
if after_id ~= '' then
  local r = redis.call('ZREVRANK', key, after_id)
  if r then rank = r + 1 else offset = 0 end
end
local fetch
function fetch(n)
  local got
  if offset then
    got = redis.call('ZREVRANGEBYSCORE', key, after_score, '-inf', 'WITHSCORES',
      'LIMIT', offset, n)
    offset = offset + #got / 2
    -- entries sharing the cursor's score come first, by id descending: those not after
    -- the cursor's id were on earlier pages
    local kept = {}
    for i = 1, #got, 2 do
      if tonumber(got[i + 1]) ~= after_score or got[i] < after_id then
        kept[#kept + 1] = got[i]
        kept[#kept + 1] = got[i + 1]
      end
    end
    if #kept == 0 and #got > 0 then return fetch(n) end
    got = kept
  else
    got = redis.call('ZREVRANGE', key, rank, rank + n - 1, 'WITHSCORES')
    rank = rank + #got / 2
  end
  return got
end

local examined, last_id, last_score = 0, nil, nil
while examined < scan do
  local want = filtered and 200 or limit - #out + 2
  local chunk = fetch(math.min(scan - examined, want))
  if #chunk == 0 then return {out, '', '', ''} end
  for i = 1, #chunk, 2 do
    local id = chunk[i]
    examined = examined + 1
    last_id, last_score = id, chunk[i + 1]
    local tk = task_key(K, id)
    if matches(redis.call('HMGET', tk, 'state', 'user', 'name')) then
      out[#out + 1] = redis.call('HGETALL', tk)
      if #out == limit then
        -- more only if an entry follows the one just examined
        if i + 2 <= #chunk or #fetch(1) > 0 then return {out, walk, last_score, last_id} end
        return {out, '', '', ''}
      end
    end
  end
end
if #fetch(1) == 0 then return {out, '', '', ''} end
return {out, walk, last_score, last_id}
