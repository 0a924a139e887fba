"""The floor of a leased, fenced, fair queue: the least any such queue must ask of the
server, written as plain scripts, to count beside fairque's (``script_instructions.py``).

What each script does, per task, and nothing more:

- push: ``EXISTS`` of the task key (a push of an existing id is a no-op), ``HSET`` of
  the task (user, name, payload, state, created), ``RPUSH`` to the user's lane, ``ZADD
  NX`` of the user into the ring;
- lease: ``TIME`` once; per task ``ZRANGE`` of the ring's head ``WITHSCORES``, ``LPOP`` of
  its lane, ``HINCRBY`` of the lease sequence (the token), ``HSET`` of state, token and
  start, ``ZADD`` to the lease registry, ``ZADD XX`` of the user's next tag (``ZREM``
  once its lane is found empty), ``HGETALL`` of the task for the reply;
- completion: ``TIME`` once; per task ``HMGET`` of token, state, user and start, and on a
  match ``HSET`` of state, result and end, ``ZREM`` from the lease registry, ``PEXPIRE``
  of the task, ``ZADD XX INCR`` of the user's tag by the run's correction.

Keys derive from a hash-tagged prefix in ``KEYS[1]``, as fairque's do, so the floor is
cluster-correct too. The scripts are not a queue to use: they keep no counters, no
histograms, no replay records, no priorities, no delays and no limits.
"""

from __future__ import annotations

from typing import Any

import redis

PUSH = """
local p = KEYS[1]
local n = 0
for i = 1, #ARGV, 5 do
  local id, user = ARGV[i], ARGV[i + 1]
  local task = p .. 'task:' .. id
  if redis.call('EXISTS', task) == 0 then
    redis.call('HSET', task, 'user', user, 'name', ARGV[i + 2], 'payload', ARGV[i + 3],
      'state', 'QUEUED', 'created', ARGV[i + 4])
    redis.call('RPUSH', p .. 'lane:' .. user, id)
    redis.call('ZADD', p .. 'ring', 'NX', 0, user)
    n = n + 1
  end
end
return n
"""

LEASE = """
local function lease(p, count, lease_ms, now)
  local ring, leases = p .. 'ring', p .. 'leases'
  local out = {}
  while #out < count do
    local head = redis.call('ZRANGE', ring, 0, 0, 'WITHSCORES')
    if #head == 0 then break end
    local user, tag = head[1], tonumber(head[2])
    local id = redis.call('LPOP', p .. 'lane:' .. user)
    if not id then
      redis.call('ZREM', ring, user)
    else
      local task = p .. 'task:' .. id
      local token = redis.call('HINCRBY', p .. 'meta', 'seq', 1)
      redis.call('HSET', task, 'state', 'STARTED', 'token', token, 'start', now)
      redis.call('ZADD', leases, now + lease_ms, id)
      redis.call('ZADD', ring, 'XX', tag + 10000, user)
      out[#out + 1] = {id, redis.call('HGETALL', task)}
    end
  end
  return out
end
"""

COMPLETE = """
local function complete(p, args, from, to, now)
  local ring, leases = p .. 'ring', p .. 'leases'
  local acks = {}
  for i = from, to, 3 do
    local id, token = args[i], args[i + 1]
    local task = p .. 'task:' .. id
    local h = redis.call('HMGET', task, 'token', 'state', 'user', 'start')
    if h[1] == token and h[2] == 'STARTED' then
      redis.call('HSET', task, 'state', 'FINISHED', 'result', args[i + 2], 'end', now)
      redis.call('ZREM', leases, id)
      redis.call('PEXPIRE', task, 3600000)
      redis.call('ZADD', ring, 'XX', 'INCR', (now - tonumber(h[4])) * 1000 - 10000, h[3])
      acks[#acks + 1] = 1
    else
      acks[#acks + 1] = 0
    end
  end
  return acks
end
"""

_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

#: ARGV: count, lease_ms
POP = LEASE + _NOW + "return lease(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), now)\n"
#: ARGV: (id, token, result) per completion
FINISH = COMPLETE + _NOW + "return complete(KEYS[1], ARGV, 1, #ARGV, now)\n"
#: ARGV: count, lease_ms, then (id, token, result) per completion
FINISH_AND_POP = (
    LEASE + COMPLETE + _NOW
    + "local acks = complete(KEYS[1], ARGV, 3, #ARGV, now)\n"
    + "return {acks, lease(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), now)}\n"
)  # fmt: skip


class FloorQueue:
    """The floor scripts over one hash-tagged prefix: push, lease, complete."""

    def __init__(self, client: redis.Redis, name: str) -> None:
        self.prefix = f"fl:{{{name}}}:"
        self._push = client.register_script(PUSH)
        self._pop = client.register_script(POP)
        self._finish = client.register_script(FINISH)
        self._finish_and_pop = client.register_script(FINISH_AND_POP)
        self._seq = 0

    def push_many(self, tasks: list[tuple[str, str, bytes]]) -> int:
        """Push (user, name, payload) triples; returns how many were new."""
        args: list[Any] = []
        for user, name, payload in tasks:
            self._seq += 1
            args += [f"t{self._seq}", user, name, payload, self._seq]
        return int(self._push(keys=[self.prefix], args=args))

    def pop(self, count: int) -> list[tuple[str, str]]:
        """Lease up to ``count`` tasks: their (id, token)."""
        return _leased(self._pop(keys=[self.prefix], args=[count, 30_000]))

    def complete(self, done: list[tuple[str, str]]) -> list[int]:
        args = [x for id_, token in done for x in (id_, token, b"null")]
        return [int(a) for a in self._finish(keys=[self.prefix], args=args)]

    def complete_and_pop(
        self, done: list[tuple[str, str]], count: int
    ) -> tuple[list[int], list[tuple[str, str]]]:
        args: list[Any] = [count, 30_000]
        args += [x for id_, token in done for x in (id_, token, b"null")]
        acks, leased = self._finish_and_pop(keys=[self.prefix], args=args)
        return [int(a) for a in acks], _leased(leased)


def _leased(reply: list[Any]) -> list[tuple[str, str]]:
    """(id, token) of each leased task of a lease's reply (the id, then the task hash)."""
    out = []
    for id_, flat in reply:
        fields = dict(zip(flat[::2], flat[1::2], strict=True))
        out.append((id_.decode(), fields[b"token"].decode()))
    return out
