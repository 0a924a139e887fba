-- The per-task and per-user keys of a queue, built from its prefix with the same suffixes
-- as fairque.keys.QueueKeys (a test compares them). A script receives every fixed key in
-- KEYS, named by its header and bound to its key table K; this is the only file that
-- derives a key from K.prefix.
-- (the task hash's fields and their Task names: the table in fairque/taskhash.py)
local function task_key(K, id) return K.prefix .. 'task:' .. id end
local function critical_key(K, user) return K.prefix .. 'crit:' .. user end
local function normal_key(K, user) return K.prefix .. 'norm:' .. user end
local function held_key(K, user) return K.prefix .. 'held:' .. user end
local function tenant_key(K, user) return K.prefix .. 'tenant:' .. user end
local function group_key(K, group) return K.prefix .. 'group:' .. group end
local function group_held_key(K, group) return K.prefix .. 'gheld:' .. group end
local function group_capped_key(K, group) return K.prefix .. 'gcapped:' .. group end
local function deps_waiting_key(K, id) return K.prefix .. 'deps:waiting:' .. id end
local function deps_blocked_key(K, id) return K.prefix .. 'deps:blocked:' .. id end
local function fetch_key(K, req) return K.prefix .. 'fetch:' .. req end
local function gone_key(K, id) return K.prefix .. 'gone:' .. id end
local function watch_key(K, id) return K.prefix .. 'watch:' .. id end
local function done_key(K, id) return K.prefix .. 'done:' .. id end
local function schedule_key(K, id) return K.prefix .. 'schedule:' .. id end
local function stops_key(K, worker) return K.prefix .. 'stops:' .. worker end
local function worker_held_key(K, worker) return K.prefix .. 'wheld:' .. worker end
local function flushed_key(K, process) return K.prefix .. 'flushed:' .. process end
local function kept_key(K, user) return K.prefix .. 'kept:' .. user end
local function user_index_key(K, user) return K.prefix .. 'uidx:' .. user end
local function name_index_key(K, name) return K.prefix .. 'nidx:' .. name end
local function constraint_rate_key(K, b) return K.prefix .. 'crate:' .. b end
local function constraint_held_key(K, b) return K.prefix .. 'cheld:' .. b end
local function constraint_parked_key(K, b) return K.prefix .. 'cpark:' .. b end
local function constraint_order_key(K, b) return K.prefix .. 'cord:' .. b end
local function aside_users_key(K, name) return K.prefix .. 'asu:' .. name end
local function constraint_buckets_key(K, c) return K.prefix .. 'cbk:' .. c end
