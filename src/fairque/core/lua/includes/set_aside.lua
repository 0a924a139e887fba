-- @include keys
-- @include aside_bucket
-- set_aside(K, id, user, name, score): task `id` of `user`, taken from its lane where it
-- had `score`, is named `name` and the worker leasing it does not handle that name: keep
-- it in the parked set of bucket '~<user>:<name>' with that score until a worker that
-- handles the name leases (take_aside puts it back). The task stays QUEUED.
local function set_aside(K, id, user, name, score)
  local b = aside_bucket(user, name)
  redis.call('ZADD', constraint_parked_key(K, b), score, id)
  redis.call('HSET', task_key(K, id), 'parked', b)
  redis.call('SADD', aside_users_key(K, name), user)
  redis.call('SADD', K.aside, name)
end
