-- @include keys
-- @include lease_tasks
-- lease_request(K, req, count, worker, lease_ms, ms, assigned, steal, any, limits, us,
-- names, fm, most): lease_tasks
-- for one client request `req`, recording what it leased (nothing, too) under
-- 'fetch:<req>' for as long as the leases last, so that a resend of the same request
-- (its reply was lost) finds the same answer with leased_before and leases nothing new.
-- `limits`: see lease_tasks. `most` (nil: no bound): the most leases `worker` may hold
-- at once, counted from its unexpired leases (worker_room); a request past it leases
-- what is left of it, or none. Returns the leased tasks.
local HELD_KEPT_MS = 86400000  -- a worker's held set outlives its last lease request
local function lease_request(K, req, count, worker, lease_ms, ms, assigned, steal, any,
                             limits, us, names, fm, most)
  if most then
-- @include worker_room
    count = math.min(count, worker_room(K, worker, most, ms))
  end
  local out, tokens = {}, {}
  if count > 0 then
    out, tokens = lease_tasks(K, count, worker, lease_ms, ms, assigned, steal, any,
      limits, us, names, fm)
  end
  redis.call('SET', fetch_key(K, req), #tokens > 0 and cjson.encode(tokens) or '[]',
    'PX', lease_ms)
  if most and #tokens > 0 then
    local entries = {}
    for i = 1, #tokens, 2 do
      entries[#entries + 1] = ms + lease_ms
      entries[#entries + 1] = tokens[i] .. ' ' .. tokens[i + 1]
    end
    local wk = worker_held_key(K, worker)
    redis.call('ZADD', wk, unpack(entries))
    redis.call('PEXPIRE', wk, HELD_KEPT_MS)
  end
  return out
end
