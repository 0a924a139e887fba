#!lua flags=allow-oom
--[[
set_fairness: make the queue fair by worker time ('time') or by turns ('count'), while
producers and workers run. The ring keeps its order: to count mode, the ring clock goes
past every start tag (a user that joins goes behind the ring) and the leases in flight
lose their charge (their end corrects nothing); to time mode, the floor comes up to the
ring's head and the turns of weighted users are forgotten. Setting the mode the queue
has already changes nothing. `max_lead_us`, when given, sets how far a tenant may be
ahead of the floor in time mode (meta 'max_lead'; bound_lead, fair_join_tag). The answer is recorded with the request id (meta
'fair_op'), so a resend after a lost reply returns it again and changes nothing.

ARGV[1] mode    'time' | 'count'
ARGV[2] req     request id (unique per call; the same when a call is resent)
ARGV[3] max_lead_us  virtual us, an integer > 0 ('': unchanged)

Reply: the mode the queue had before this call.
]]
-- @include keys
-- @include fair_timed
-- @include replayed

local K = {prefix = KEYS[1], ring = KEYS[2], meta = KEYS[3], turns = KEYS[4], leases = KEYS[5]}
local mode, req = ARGV[1], ARGV[2]
local m = redis.call('HMGET', K.meta, 'fair', 'floor', 'clock', 'fair_op')
local again = replayed(m[4], req)
if again then return again end
local was = fair_timed(m[1]) and 'time' or 'count'
redis.call('HSET', K.meta, 'fair_op', req .. ' ' .. was)
if ARGV[3] ~= '' then redis.call('HSET', K.meta, 'max_lead', ARGV[3]) end
if was == mode then return was end
if mode == 'count' then
  local last = redis.call('ZRANGE', K.ring, -1, -1, 'WITHSCORES')[2]
  local clock = math.max(tonumber(m[3] or '0'), math.ceil(tonumber(last or '0')))
  redis.call('HSET', K.meta, 'fair', 'count', 'clock', string.format('%d', clock))
  local leased = redis.call('ZRANGE', K.leases, 0, -1)
  for _, id in ipairs(leased) do
    redis.call('HDEL', task_key(K, id), 'fair')
  end
else
  local head = redis.call('ZRANGE', K.ring, 0, 0, 'WITHSCORES')[2]
  local floor = math.max(tonumber(m[2] or '0'), tonumber(head or '0'))
  redis.call('HSET', K.meta, 'fair', 'time', 'floor', string.format('%d', floor))
  redis.call('DEL', K.turns)
end
return was
