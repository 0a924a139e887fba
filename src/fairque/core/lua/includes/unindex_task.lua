-- @include keys
-- unindex_task(K, id, user, name): take task `id` out of its user's and its name's
-- index (user_index, name_index), dropping an index that empties.
local function unindex_task(K, id, user, name)
  if user then redis.call('ZREM', user_index_key(K, user), id) end
  if name then redis.call('ZREM', name_index_key(K, name), id) end
end
