-- @include due_by
-- @include keys
-- @include task_stock
-- @include lease_fence
-- @include end_attempt
-- @include constraint_free
-- @include finalize
-- @include slot_members
-- @include compact_record
-- complete_task(K, id, token, has_result, result, ms, us, ordering, horizon_us, acc,
-- run_us): finish a leased task if `token` still holds its lease, store its result
-- (when the task keeps results) and release the dependents waiting only for it.
-- `run_us`: the handler's run as the worker measured it ('': not reported; see
-- handler_ms), what the attempt is charged as. A resend of a
-- completion that succeeded succeeds again and changes nothing. Returns
-- 1 or 0 (lease lost), and the number of dependents made ready.
-- `acc` ({}, one per call) is shared by the call's completions; with acc.later =
-- {leases = {}, ends = {}, registry = {}} (a call of many completions) it gathers the
-- members of the lease registry's ZREM and of the FINISHED registry's and `ends`'
-- ZADDs, which write_later writes one command each (nothing reads those keys meanwhile). The FINISHED registry's expired
-- entries are trimmed at most once per call, by a completion whose lease token is a
-- multiple of 16 (acc.trimmed): a ZREMRANGEBYSCORE per completion bought nothing that
-- readers need (they skip expired ids; maintain and stats trim too).
-- The functions of the rare paths (a resent or lost completion, dependents to release)
-- are made only when the path is taken (a script makes every function it defines on
-- each run).
local function complete_task(K, id, token, has_result, result, ms, us, ordering, horizon_us,
                             acc, run_us)
  local req = 'L' .. token
  local held, f = lease_fence(K, id, token, 'user', 'keep_result', 'result_ttl', 'op',
    'started', 'cons', 'name', 'fair', 'retries', 'cost', 'gheld', 'bytes')
  if not held then
-- @include replayed
-- @include last_op
    if replayed(last_op(K, id, f[1], f[6]), req) == 'FINISHED' then return 1, 0 end
    redis.call('HINCRBY', K.stats, 'lease_lost', 1)
    return 0, 0
  end
  local ran = ms - (f[7] or ms)  -- (numeric strings coerce)
  -- one EXISTS for the usual case: no user is held out by its cap (the capped set is
  -- empty: release_slot has nothing to look up) and nobody waits for the task, as a
  -- dependency or a result; else the two sets are told apart as before
  local blocked, watch = deps_blocked_key(K, id), watch_key(K, id)
  local found = redis.call('EXISTS', K.capped, blocked, watch)
  local waited = found > 0 and redis.call('EXISTS', blocked, watch) or 0
  if found > waited or f[13] then  -- (f[13]: it holds slots of its group's cap)
    end_attempt(K, id, f[3], ms, f[8], f[12], f[13], {ran, f[10], 'done', us, run_us},
      'error', 'traceback', 'reason', 'details')
  else
    -- end_attempt with its release_slot down to the ZREM: nobody is capped
    if acc.later then
      local leases = acc.later.leases
      leases[#leases + 1] = id
    else
      redis.call('ZREM', K.leases, id)
    end
    constraint_free(K, id, ms, f[8], f[12])
    if f[12] then
      redis.call('ZREM', held_key(K, f[3]), unpack(slot_members(id, f[12])))
    else
      redis.call('ZREM', held_key(K, f[3]), id)
    end
    fair_settle(K, f[3], {ran, f[10], 'done', us, run_us})
  end
  compact_record(K, id, f[11] and f[11] ~= '0')  -- its lease fields go with its payload
  local trimmed = acc.trimmed or token % 16 ~= 0  -- token: the held lease's, numeric
  local known = {user = f[3], name = f[9], unwatched = false, counted = true,
    trimmed = trimmed, later = acc.later, bytes = f[14] or false}
  if not trimmed then acc.trimmed = true end
  if has_result and (f[4] or select(3, task_stock())) == '1' then known.result = result end
  local ready = 0
  if waited == 0 then
    known.unwatched = true
  elseif redis.call('EXISTS', blocked) == 1 then
-- @include release_dependents
    ready = release_dependents(K, id, ms, us, ordering, horizon_us)
  end
  local ttl_ms = (f[5] or select(4, task_stock())) + 0
  finalize(K, id, 'FINISHED', K.finished, ms, ttl_ms, 'completed', req .. ' FINISHED', known)
  return 1, ready
end
