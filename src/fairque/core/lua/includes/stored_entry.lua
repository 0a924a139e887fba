-- stored_entry(K, id, req): a push's reply entry for an id that exists: {1, <HGETALL of
-- the task>, mine} (mine: 1 when request `req` created it, i.e. this call is a resend),
-- or {2, state} when only the tombstone of a task that ended and expired is left.
local function stored_entry(K, id, req)
  local stored = redis.call('HGETALL', task_key(K, id))
  if #stored > 0 then
    local mine = 0
    for j = 1, #stored, 2 do
      if stored[j] == 'pushed' then
        if stored[j + 1] == req then mine = 1 end
        break
      end
    end
    return {1, stored, mine}
  end
  local gone = redis.call('GET', gone_key(K, id))
  return {2, string.match(gone or 'CANCELED', '^%S+')}
end
