-- @include keys
-- @include lease_take
-- @include lease_untake
-- @include lease_gate
-- @include leave_ring
-- @include pick_user
-- @include now
-- @include signal_wake
-- @include fair_timed
-- @include fair_first_est
-- @include constraint_lib
-- @include write_tags
-- @include lease_write
-- @include slot_members
-- lease_tasks(K, count, worker, lease_ms, ms, assigned, steal, any, limits, us, names,
-- fm):
-- lease up to
-- `count` ready tasks, choosing users round robin (see pick_user). A served user moves
-- to the ring's tail (after `weight` consecutive turns for a weighted user); a user
-- whose unexpired leases reach its in-flight cap leaves the ring until a slot frees.
-- Returns the leased tasks (each the flat HGETALL of its hash) and the flat list of
-- their (id, lease token) pairs, from lease_write.
-- Cost: the loop chooses the tasks; the writes every task of the call gets alike (its
-- lease token, the QUEUED and lease registries, the counters, each task's wait: ready ->
-- leased) follow it in lease_write, one command each for the whole call where the
-- command takes many members. The queue's counters
-- (mode, floor, lease sequence, ring clock) are read once and written back once. A queue
-- with no constraints, weights or caps learns so from one EXISTS of the three hashes
-- (`limits` false: the caller's EXISTS found none of them, true: some, nil: look here);
-- otherwise a batch (count > 1) looks up weights and caps only when the queue has any.
-- `us`: the call's time in microseconds (time mode stamps each lease's start with it).
-- `fm`: the queue's counters (meta 'fair', 'floor', 'lease', 'clock', 'due', 'costly',
-- 'counted', 'weights', 'group_caps', 'group_backlogs') as the caller read them, or nil to read them here; a lease that ends before the 'due'
-- hint lowers it (due_by's rule, in the same write).
-- A batch with no assigned users serves the ring's head each time: it reads the ring's first users once and follows them (a
-- user that stays is the head still; one that rotates goes behind all of them; the
-- loop is the ring's only writer meanwhile), reading again when they run out; its
-- rotations are written in one ZADD per reading (before the next reading, and at the
-- end), a rotation its user's cap takes back never written.
-- Time mode (fair.lua): the ring's scores are start tags; each pick takes the lowest
-- (the head, or the least served of the assigned / steal users) and moves it on by the
-- user's estimate over its weight, one ZADD, with no turns; a user that leaves the ring
-- keeps its tag in its tenant hash; the floor follows the head's tag, written once.
-- Every leased task's wait also goes to its user's histogram (tenant hash) and the
-- user's last lease to 'active' (lease_write), which reads the tenant 'seen' the loop
-- read with the estimate (`seens`).
-- Constraints (only when the queue has any): due constraint
-- buckets first put parked tasks back into their lanes; a task whose buckets are over
-- a limit is parked (constraint_park) and the same user's next task is tried, so a
-- limited task blocks neither other users nor its user's unlimited tasks.
-- Names: `names` is the set of task names the worker handles (false: any). A task with
-- another name is set aside (set_aside) as a limited task is parked, and the same user's
-- next task is tried; tasks set aside under names the worker handles go back to their
-- lanes first (take_aside), so they are served by the same rule as every other task.
-- Setting aside wakes idle workers (one token per task), so one that handles the name
-- looks at the queue. A queue with tasks set aside has its 'aside' set, one of the keys
-- `limits` looks for.
local function lease_tasks(K, count, worker, lease_ms, ms, assigned, steal, any, limits, us,
                           names, fm)
  local deadline = ms + lease_ms
  local picked = {}
  local guard, parks, asides = 0, 0, 0
  local limited, weighted, capping = false, false, false
  if limits == nil then
    limits = redis.call('EXISTS', K.constraints, K.weights, K.caps, K.aside) > 0
  end
  local now_us, constraint_check, constraint_take, constraint_park, set_aside
  local constraint_order, constraint_charge
  if limits then
    -- the hash holds the constraints and their version ('~version')
    limited = redis.call('HLEN', K.constraints) > 1
    weighted, capping = true, true
    if count > 1 then
      weighted = redis.call('HLEN', K.weights) > 0
      capping = redis.call('HLEN', K.caps) > 0
    end
    local aside = redis.call('EXISTS', K.aside) == 1
    if limited or aside then
      local constraint_due, take_aside
      constraint_check, constraint_take, constraint_park, constraint_due, set_aside,
        take_aside, constraint_order, constraint_charge = constraint_lib()
      if aside then take_aside(K, names, count) end
      if limited then
        now_us = select(2, now())  -- GCRA works in microseconds
        constraint_due(K, ms, now_us, 64)
      end
    end
  end
  -- the queue's counters in one read and (below) one write: the mode, the floor, the
  -- lease sequence and the ring clock (nothing else moves them meanwhile)
  fm = fm or redis.call('HMGET', K.meta, 'fair', 'floor', 'lease', 'clock', 'due', 'costly',
    'counted', 'weights', 'group_caps', 'group_backlogs')
  -- a queue that was ever pushed a task of cost > 1 (push.lua sets 'costly') reads each
  -- task's cost; any other has none to read
  local costly = fm[6] == '1'
  -- a queue whose ring is counted (set_user_limits sets 'counted' for groups and shares):
  -- a grouped tenant's weight is shared with the others of its group in the ring, and a
  -- share (floor, ceiling) is of the ring's top-level weights ('weights', ring_count)
  local counted = fm[7] or false
  -- shared_weight, made only on a counted queue (a function made costs every run)
  local weigh
  if counted then
-- @include shared_weight
    weigh = shared_weight
  end
  -- a queue with a group's in-flight cap ever set (set_group_limits sets 'group_caps'):
  -- a grouped tenant's lease takes slots of its group's cap, counted from leases
  local group_caps = fm[9] or false
  local first_est  -- a new user's first charge (fair_first_est), read when one is served
  local timed = fair_timed(fm[1])
  local floor = tonumber(fm[2] or '0')
  local first_floor = floor
  local clock = tonumber(fm[4] or '0')
  local first_clock = clock
  local by_ring_head = #assigned == 0 and (any or #steal == 0)
  -- (not on a costly queue: a task of cost N puts its user N rounds back, past users
  -- that the read list would serve first)
  -- (nor on a counted one: a grouped or shared user's turn may put it rounds back too)
  local by_head = count > 1 and by_ring_head and not timed and not costly and not counted
  local owners, charges = {}, {}
  -- time mode, a batch from the ring's head: the ring's first users and their tags are
  -- read once, in order (`tu`, `tt` from index `th` on, with `beyond` the tag and user
  -- of the first user not read, or nil when none is left); each pick takes the one at
  -- `th`, a charged user goes back in at its new tag (binary search), new tags are kept
  -- in `moved_to` and written in one ZADD; the ring is read again when the first read
  -- user is past `beyond`
  local by_tags = timed and count > 1 and by_ring_head
  local tu, tt, th, beyond, moved_to = nil, nil, 1, nil, {}
  local ests = {}  -- time mode: each user's estimate, read once per call
  local seens = {}  -- time mode: each user's tenant 'seen', read with the estimate
  local groups = {}  -- time mode: each user's group (false: none), read with them
  local shares = {}  -- time mode: each user's share ('<floor> <ceiling>'; false: none)
  local gtaken = {}  -- the group whose cap each leased task holds slots of (or nil)
  local capd = {}  -- whether each leased task holds a slot of a cap (see held_cap)
  local heads, at_head = {}, 1
  local rotations = {}  -- by_head: (clock, user) pairs not yet written to the ring
  while #picked < count and guard < count + 64 do
    guard = guard + 1
    local user, score
    if by_tags then
      if tu and beyond and (th > #tu or tt[th] > beyond[1]
          or (tt[th] == beyond[1] and tu[th] > beyond[2])) then
        tu = nil  -- the first read user is past the first one not read: read again
      end
      if not tu then
        write_tags(K, moved_to)
        moved_to = {}
        local want = math.min(count - #picked, 499) + 1
        local got = redis.call('ZRANGE', K.ring, 0, want - 1, 'WITHSCORES')
        tu, tt, th, beyond = {}, {}, 1, nil
        for i = 1, #got, 2 do
          tu[#tu + 1] = got[i]
          tt[#tt + 1] = tonumber(got[i + 1])
        end
        if #tu == want then beyond = {table.remove(tt), table.remove(tu)} end
      end
      user, score = tu[th], tt[th]
      if score and score > floor then floor = score end
    elseif timed then
      if by_ring_head then
        local head = redis.call('ZRANGE', K.ring, 0, 0, 'WITHSCORES')
        user, score = head[1], tonumber(head[2])
        if score and score > floor then floor = score end
      else
        user = pick_user(K.ring, assigned, steal, any)
        if user then
          score = tonumber(redis.call('ZSCORE', K.ring, user))
          local head = redis.call('ZRANGE', K.ring, 0, 0, 'WITHSCORES')
          if head[2] and tonumber(head[2]) > floor then floor = tonumber(head[2]) end
        end
      end
    elseif by_head then
      if at_head > #heads then
        if #rotations > 0 then
          redis.call('ZADD', K.ring, unpack(rotations))
          rotations = {}
        end
        heads = redis.call('ZRANGE', K.ring, 0, math.min(count - #picked, 500) - 1)
        at_head = 1
      end
      user = heads[at_head]
    else
      user = pick_user(K.ring, assigned, steal, any)
    end
    if not user then break end
    local moved = true  -- the user left the ring's head (left the ring, or rotated)
    local rotated = false  -- by_head: this user's rotation is the last of `rotations`
    -- the task, its normal-lane score (nil: the critical lane), whether more is ready
    local id, lane, more = lease_take(K, user)
    local plan, blocked, free_at, other, full
    local cost = 1  -- the task's slots and tokens ('cost'; 1 when absent)
    -- a task once parked in a global bucket's fair order: '<tag> <lane> <bucket>'
    local ptag, released
    if id and names then
      local f = redis.call('HMGET', task_key(K, id), 'name', 'cons', 'cost', 'ptag')
      cost = f[3] and f[3] + 0 or 1
      ptag = f[4]
      if not names[f[1]] then
        other = f[1]
      elseif limited and f[2] then
        if ptag then released = string.match(ptag, '^%S+ %S+ (.*)$') end
        plan, blocked, free_at = constraint_check(K, f[2], ms, now_us, cost, released)
      end
    elseif id and (limited or costly) then
      local f = redis.call('HMGET', task_key(K, id), 'cons', 'cost', 'ptag')
      cost = f[2] and f[2] + 0 or 1
      ptag = f[3]
      if limited and f[1] then
        if ptag then released = string.match(ptag, '^%S+ %S+ (.*)$') end
        plan, blocked, free_at = constraint_check(K, f[1], ms, now_us, cost, released)
      end
    end
    -- the caps' gate (lease_gate): the slots the lease holds, whether it holds a cap's,
    -- its group's slots taken, or `full` (its user's cap, or its group's name)
    local slots, cap, held_cap, gheld = cost, 0, false, nil
    if id and not (blocked or other) then
      slots, cap, held_cap, gheld, full = lease_gate(K, user, id, cost, ms, deadline,
        capping, group_caps, groups)
    end
    if full then
      lease_untake(K, user, id, lane)
      redis.call('SADD', K.capped, user)
      if full ~= true then redis.call('SADD', group_capped_key(K, full), user) end
      leave_ring(K, user, timed and score, counted)
    end
    if tu and (not id or full or ((blocked or other) and not more)) then  -- the user leaves
      th = th + 1
      moved_to[user] = nil
    end
    if not id then
      leave_ring(K, user, timed and score, counted)
    elseif full then
      guard = guard - 1  -- the user left the ring: progress, bounded by `parks`
      parks = parks + 1
      if parks >= 256 then break end
    elseif other then
      if not set_aside then set_aside = select(5, constraint_lib()) end
      -- a critical task waits ahead of every normal-lane score, oldest first
      set_aside(K, id, user, other, lane or (ms - 4e15))
      if more then moved = false else leave_ring(K, user, timed and score, counted) end
      guard = guard - 1  -- the task left its lane: progress, bounded by `parks`
      parks, asides = parks + 1, asides + 1
      if parks >= 256 then
        signal_wake(K, asides + 1)  -- another call goes on from here
        asides = 0
        break
      end
    elseif blocked then
      -- a critical task parks ahead of every normal-lane score, oldest first; in a
      -- global bucket it takes its tag in the bucket's fair order (once: a task let go
      -- that has to wait again keeps the tag it had)
      local tag
      if blocked == string.match(blocked, '^[^:]+') then
        if released == blocked then
          tag = tonumber(string.match(ptag, '^%S+'))
        else
          tag = constraint_order(K, blocked, user,
            constraint_charge(K, user, cost, timed, weigh))
        end
      end
      constraint_park(K, id, blocked, lane or (ms - 4e15), free_at, tag)
      if more then moved = false else leave_ring(K, user, timed and score, counted) end
      guard = guard - 1  -- the task left its lane: progress, bounded by `parks`
      parks = parks + 1
      if parks >= 256 then
        signal_wake(K, 1)  -- another call goes on from here
        break
      end
    elseif timed then
      local w = weighted and tonumber(redis.call('HGET', K.weights, user) or '1') or 1
      local known = ests[user]
      if known == nil then
        local got = redis.call('HMGET', tenant_key(K, user), 'est', 'seen', 'group', 'share')
        known = got[1]
        ests[user], seens[user], groups[user], shares[user] = known, got[2], got[3], got[4]
      end
      if counted then w = weigh(K, w, groups[user], shares[user]) end
      if not known and not first_est then first_est = fair_first_est(K) end
      local est = known and tonumber(known) or first_est
      if est > lease_ms then est = lease_ms end  -- a heartbeat charges the rest
      -- a task of cost N is charged as if its user's weight were w / N
      local wd = cost > 1 and w / cost or w
      local charge = math.max(math.floor(est * 1000 / wd + 0.5), 1)
      local tag = score + charge
      local held = held_key(K, user)
      if slots > 1 then
        redis.call('ZADD', held, unpack(slot_members(id, slots, deadline)))
      else
        redis.call('ZADD', held, deadline, id)
      end
      local stays = more
      if cap > 0 and redis.call('ZCOUNT', held, '(' .. ms, '+inf') >= cap then
        redis.call('SADD', K.capped, user)
        stays = false
      end
      if tu then
        th = th + 1
        moved_to[user] = stays and tag or nil
        if stays then  -- back in at its new tag, after the users with the same tag
          local lo, hi = th, #tt + 1
          while lo < hi do
            local mid = math.floor((lo + hi) / 2)
            if tt[mid] < tag or (tt[mid] == tag and tu[mid] < user) then
              lo = mid + 1
            else
              hi = mid
            end
          end
          table.insert(tu, lo, user)
          table.insert(tt, lo, tag)
        end
      end
      if not stays then
        leave_ring(K, user, tag, counted)
      elseif not tu then
        redis.call('ZADD', K.ring, string.format('%d', tag), user)
      end
      -- the task's 'fair' field (fair_timed): the charge, then (below) the lease's start
      local exact = wd == math.floor(wd)
      charges[#picked + 1] = string.format(exact and '%d %d %s' or '%d %.17g %s', charge, wd,
        known or '-')
      if plan then
        constraint_take(K, id, plan, deadline, now_us, user,
          function() return constraint_charge(K, user, cost, timed, weigh) end)
        if ptag then redis.call('HDEL', task_key(K, id), 'ptag') end
      end
      gtaken[#picked + 1] = gheld
      capd[#picked + 1] = held_cap
      picked[#picked + 1] = id
      owners[#picked] = user
    else
      if not more then
        leave_ring(K, user, false, counted)
      else
        local rotate, at = true, nil
        local w = weighted and tonumber(redis.call('HGET', K.weights, user) or '1') or 1
        if counted then
          -- a counted queue (groups) serves by strides: the clock counts turns (a task
          -- of cost N takes N), and a user of turn weight `e` (its weight, or its part
          -- of its group's) goes back in `N / e - 1` rounds past the clock, a round being
          -- the turns of the ring's top-level weights (meta 'weights': the sum of the
          -- turn weights); so users are served in proportion to their turn weights, and
          -- one of weight 1 goes to the ring's tail. (Shares are of worker time: time
          -- mode only.)
          local g = groups[user]
          if g == nil then
            g = redis.call('HGET', tenant_key(K, user), 'group')
            groups[user] = g
          end
          local e = g and weigh(K, w, g, nil, true) or w
          clock = clock + cost
          at = clock + (cost / e - 1) * math.max(tonumber(fm[8] or '1'), 1)
        else
          local rounds = 1
          if w > 1 or cost > 1 then  -- a task of cost N counts as N turns
            local used = redis.call('HINCRBY', K.turns, user, cost)
            if used < w then
              rotate, moved = false, false
            else
              redis.call('HDEL', K.turns, user)
              rounds = math.floor(used / w)
            end
          end
          if rotate then
            clock = clock + 1
            at = clock
            -- turns that fill more than one round sit the further rounds out: behind one
            -- rotation of each other user in the ring for each, and ahead of the next
            -- (half a step: a tie would go by name)
            if rounds > 1 then
              at = clock + (rounds - 1) * (redis.call('ZCARD', K.ring) - 1) + 0.5
            end
          end
        end
        if rotate then
          if by_head then
            rotations[#rotations + 1] = at
            rotations[#rotations + 1] = user
            rotated = true
          else
            redis.call('ZADD', K.ring, at, user)
          end
        end
      end
      local held = held_key(K, user)
      if slots > 1 then
        redis.call('ZADD', held, unpack(slot_members(id, slots, deadline)))
      else
        redis.call('ZADD', held, deadline, id)
      end
      if cap > 0 and redis.call('ZCOUNT', held, '(' .. ms, '+inf') >= cap then
        if rotated then
          rotations[#rotations] = nil
          rotations[#rotations] = nil
        end
        leave_ring(K, user, false, counted)
        redis.call('SADD', K.capped, user)
        moved = true
      end
      if plan then
        constraint_take(K, id, plan, deadline, now_us, user,
          function() return constraint_charge(K, user, cost, timed, weigh) end)
        if ptag then redis.call('HDEL', task_key(K, id), 'ptag') end
      end
      gtaken[#picked + 1] = gheld
      capd[#picked + 1] = held_cap
      picked[#picked + 1] = id
      owners[#picked] = user
    end
    if moved then at_head = at_head + 1 end
  end
  if asides > 0 then signal_wake(K, asides) end
  write_tags(K, moved_to)
  if #rotations > 0 then redis.call('ZADD', K.ring, unpack(rotations)) end
  local n = #picked
  local token = tonumber(fm[3] or '0')
  if n > 0 or clock > first_clock or floor > first_floor then
    local counters = {'lease', string.format('%d', token + n)}
    if clock > first_clock then
      counters[#counters + 1] = 'clock'
      counters[#counters + 1] = string.format('%d', clock)
    end
    if floor > first_floor then
      counters[#counters + 1] = 'floor'
      counters[#counters + 1] = string.format('%d', floor)
    end
    if n > 0 and fm[5] and deadline < fm[5] + 0 then
      counters[#counters + 1] = 'due'
      counters[#counters + 1] = string.format('%d', deadline)
    end
    redis.call('HSET', K.meta, unpack(counters))
  end
  if n == 0 then return {}, {} end
  local fstart = timed and string.format('%d', us or select(2, now())) or ''
  return lease_write(K, picked, owners, charges, gtaken, capd, capping or group_caps, worker,
    deadline, ms, fstart, token, seens, fm[10] == '1')
end
