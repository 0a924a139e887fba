-- @include keys
-- @include lease_tasks
-- lease_request(K, req, count, worker, lease_ms, ms, assigned, steal, any, limits, us,
-- names, fm): lease_tasks
-- for one client request `req`, recording what it leased (nothing, too) under
-- 'fetch:<req>' for as long as the leases last, so that a resend of the same request
-- (its reply was lost) finds the same answer with leased_before and leases nothing new.
-- `limits`: see lease_tasks. Returns the leased tasks.
local function lease_request(K, req, count, worker, lease_ms, ms, assigned, steal, any,
                             limits, us, names, fm)
  local out, tokens = lease_tasks(K, count, worker, lease_ms, ms, assigned, steal, any,
    limits, us, names, fm)
  redis.call('SET', fetch_key(K, req), #tokens > 0 and cjson.encode(tokens) or '[]',
    'PX', lease_ms)
  return out
end
