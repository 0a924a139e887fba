-- @include keys
-- bytes_add(K, user, n): add `n` bytes (negative: take) to what the user's tasks hold
-- (the backlog hash's field '<user>\0b', which a push holds to the user's byte quota,
-- max_bytes). Only a task pushed under a byte quota is counted (its 'bytes' field: its
-- payload's length), from its push while it waits or runs, and once it ended for what
-- its record keeps (finalize: a FINISHED task's result, a FAILED or CANCELED one's
-- payload; kept_key) until the record expires (maintain) or is deleted. A count that
-- reaches 0 leaves the hash.
local function bytes_add(K, user, n)
  local field = user .. '\0b'
  if redis.call('HINCRBY', K.backlog, field, n) <= 0 then redis.call('HDEL', K.backlog, field) end
end
