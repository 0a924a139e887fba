--[[
list_tasks: one page of a queue's tasks, newest first, with a cursor to the next page.

Three walks, chosen per page:
- state only ('s'): the state's registry, highest score first. "Newest" is that
  registry's time: SCHEDULED by due time, DEFERRED by push time, QUEUED by the time it
  became ready, STARTED by lease deadline, FINISHED/FAILED/CANCELED by expiry (end time
  plus the task's TTL: end order when the TTLs are equal).
- a user and/or a name ('u', 'n'): the smaller of the user's and the name's index
  (every task, any state, by creation time), newest created first; each entry's state,
  user and name are checked from its hash. At most `scan` entries are examined, so a
  page may hold fewer tasks than asked for (even none) and still have a next cursor.
- a user and/or a name with a state whose registry holds at most `scan` tasks ('r'):
  that registry, read whole and ordered by creation time like the indexes.
Ties (one creation time) go by id, descending. A cursor names the walk and the last
entry examined; the next page resumes right after it (found by rank), or, if it has
left its index since, after its time.

KEYS[1] prefix    fq:{<queue>}:  per-task and per-user keys derive from it (includes/keys.lua)
KEYS[2] delayed   SCHEDULED registry: task id -> due time
KEYS[3] deferred  DEFERRED registry: task id -> push time
KEYS[4] queued    QUEUED registry: task id -> enqueue time
KEYS[5] leases    STARTED registry: task id -> lease deadline
KEYS[6] finished  FINISHED registry: task id -> expiry time
KEYS[7] failed    FAILED registry: task id -> expiry time
KEYS[8] canceled  CANCELED registry: task id -> expiry time

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

-- 'r': a small registry, read whole, ordered by creation time
if registry and (user ~= '' or name ~= '') and redis.call('ZCARD', registry) <= scan then
  local found = {}
  for _, id in ipairs(redis.call('ZRANGE', registry, 0, -1)) do
    local f = redis.call('HMGET', task_key(K, id), 'state', 'user', 'name', 'created')
    if matches(f) then found[#found + 1] = {tonumber(f[4]), id} end
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

-- 's', 'u', 'n': walk one sorted set from the cursor, newest first
local key
if user == '' and name == '' then
  walk, key = 's', registry
elseif user ~= '' and name ~= '' then
  if walk ~= 'u' and walk ~= 'n' then
    local nu = redis.call('ZCARD', user_index_key(K, user))
    walk = nu <= redis.call('ZCARD', name_index_key(K, name)) and 'u' or 'n'
  end
  key = walk == 'u' and user_index_key(K, user) or name_index_key(K, name)
elseif user ~= '' then
  walk, key = 'u', user_index_key(K, user)
else
  walk, key = 'n', name_index_key(K, name)
end

-- where to resume: by rank when the cursor's entry is still there, else by score
local rank, offset = 0, nil
if after_id ~= '' then
  local r = redis.call('ZREVRANK', key, after_id)
  if r then rank = r + 1 else offset = 0 end
end
local function fetch(n)
  local got
  if offset then
    got = redis.call('ZREVRANGEBYSCORE', key, '(' .. after_score, '-inf', 'WITHSCORES',
      'LIMIT', offset, n)
    offset = offset + #got / 2
  else
    got = redis.call('ZREVRANGE', key, rank, rank + n - 1, 'WITHSCORES')
    rank = rank + #got / 2
  end
  return got
end

local examined, last_id, last_score = 0, nil, nil
while examined < scan do
  local want = walk == 's' and limit - #out + 2 or 200
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
