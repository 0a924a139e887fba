-- @include keys
-- worker_room(K, worker, most, ms): how many more leases `worker` may take under its
-- bound `most` (a pull worker's registered concurrency). Its leases are recorded in
-- its held set (worker_held_key, members '<id> <token>', written by lease_request) and
-- counted from the tasks themselves: one counts while the task's lease is that token
-- and unexpired; the rest (ended, expired, taken over) leave the set here.
local function worker_room(K, worker, most, ms)
  local wk = worker_held_key(K, worker)
  local held, gone = 0, {}
  for _, m in ipairs(redis.call('ZRANGE', wk, 0, -1)) do
    local id, token = string.match(m, '^(.*) (%d+)$')
    local f = redis.call('HMGET', task_key(K, id), 'lease', 'deadline')
    if f[1] == token and tonumber(f[2]) > ms then
      held = held + 1
    else
      gone[#gone + 1] = m
    end
  end
  if #gone > 0 then redis.call('ZREM', wk, unpack(gone)) end
  return math.max(most - held, 0)
end
