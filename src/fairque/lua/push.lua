--[[
push: enqueue one or more tasks atomically (a batch is all or nothing).

KEYS[1] prefix      fq:{<queue>}:  (per-task and per-user keys derive from it)
KEYS[2] queued      QUEUED registry
KEYS[3] delayed     SCHEDULED registry
KEYS[4] ring        users with ready work
KEYS[5] meta        queue counters
KEYS[6] stats       throughput counters
KEYS[7] wake        wake-up list idle workers block on

ARGV[1] ordering    'aging' | 'strict'
ARGV[2] horizon_us  aging horizon in microseconds
ARGV[3] on_dup      'return' (existing task is a no-op) | 'error'
ARGV[4] n           number of tasks; then 11 values per task:
        id, user, name, payload, prio (1..6), max_retries, delay_ms (-1 none),
        run_at_ms (-1 none), timeout_ms (-1 none), keep_result (0|1), result_ttl_ms

Reply: one entry per task: {0, state, created_ms} for a new task, or
       {1, <HGETALL of the existing task>} for an id that already exists.
Errors: 'FQERR -3 <id>' (DuplicateTask) when on_dup is 'error'; nothing is written.
]]
-- @include now
-- @include mono_us
-- @include enqueue_ready

local prefix = KEYS[1]
local ordering, horizon_us, on_dup = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local n = tonumber(ARGV[4])
local W = 11

if on_dup == 'error' then
  for i = 0, n - 1 do
    local id = ARGV[5 + i * W]
    if redis.call('EXISTS', prefix .. 'task:' .. id) == 1 then
      return redis.error_reply('FQERR -3 task ' .. id .. ' already exists')
    end
  end
end

local ms, us = now()
local reply = {}
local ready = 0
for i = 0, n - 1 do
  local b = 5 + i * W
  local id, user, name, payload = ARGV[b], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3]
  local prio, max_retries = tonumber(ARGV[b + 4]), ARGV[b + 5]
  local delay_ms, run_at_ms = tonumber(ARGV[b + 6]), tonumber(ARGV[b + 7])
  local timeout_ms, keep, ttl = tonumber(ARGV[b + 8]), ARGV[b + 9], ARGV[b + 10]
  local tk = prefix .. 'task:' .. id
  if redis.call('EXISTS', tk) == 1 then
    reply[#reply + 1] = {1, redis.call('HGETALL', tk)}
  else
    redis.call('HSET', tk, 'id', id, 'user', user, 'name', name, 'payload', payload,
      'prio', prio, 'retries', 0, 'max_retries', max_retries, 'created', ms,
      'keep_result', keep, 'result_ttl', ttl)
    if timeout_ms >= 0 then redis.call('HSET', tk, 'timeout', timeout_ms) end
    local due = -1
    if run_at_ms >= 0 then due = run_at_ms elseif delay_ms >= 0 then due = ms + delay_ms end
    local state = 'QUEUED'
    if due > ms then
      state = 'SCHEDULED'
      redis.call('HSET', tk, 'state', state, 'run_at', due)
      redis.call('ZADD', prefix .. 'delayed', due, id)
    else
      enqueue_ready(prefix, id, user, prio, mono_us(prefix, us), ms, ordering, horizon_us)
      ready = ready + 1
    end
    redis.call('HINCRBY', prefix .. 'stats', 'pushed', 1)
    reply[#reply + 1] = {0, state, ms}
  end
end
if ready > 0 then
  -- one token per ready task (bounded) wakes as many idle workers
  local tokens = {}
  for i = 1, math.min(ready, 16) do tokens[i] = '1' end
  redis.call('LPUSH', KEYS[7], unpack(tokens))
  redis.call('LTRIM', KEYS[7], 0, 63)
end
return reply
