"""Which shard a tenant lives in, and the hash tags of a sharded queue's shards.

A sharded queue is N complete partitions, each under its own hash tag (shard 0 under
the queue's own, so an unsharded queue is shard 0 of itself). A tenant lives in
exactly one shard: ``shard_of`` is a jump consistent hash of a 64-bit digest of the
user id, so growing from N to M shards moves only the tenants that land on the new
shards, and any client in any language finds the same shard (BLAKE2b-64 of the UTF-8
id, big-endian, then the published jump hash).

Each tag's cluster slot is chosen when the shard is created: shard i of N aims at the
slot i/N of the slot space past shard 0's, so on a cluster whose masters own equal
runs of slots (what ``--cluster create`` makes) a multiple of the master count spreads
evenly over them.
"""

from __future__ import annotations

import hashlib

from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

from fairque.core.checks import check_int
from fairque.core.keys import QueueKeys, shard_tag
from fairque.errors import ConfigError, ValidationError

#: The most shards a queue may have.
MAX_SHARDS = 1024
#: Salts tried for a shard's tag before the closest slot found is taken.
SALT_TRIES = 200_000
#: A shard's slot this close to its target is taken at once (a cluster node owns ranges
#: of thousands of slots, so a few slots off place the shard on the same node).
SLOT_GAP = 4


def check_shards(shards: object) -> int:
    """``shards`` if it is a shard count (1..MAX_SHARDS).

    Raises:
        ConfigError: it is not an int in range.
    """
    try:
        return check_int(shards, "shards", 1, MAX_SHARDS)
    except ValidationError as exc:
        raise ConfigError(str(exc)) from None


def jump_hash(key: int, buckets: int) -> int:
    """The bucket (0..buckets-1) of a 64-bit ``key`` by Lamping and Veach's jump
    consistent hash: with one more bucket, a key moves only to the new one."""
    b, j = -1, 0
    while j < buckets:
        b = j
        key = (key * 2862933555777941757 + 1) & 0xFFFFFFFFFFFFFFFF
        j = int((b + 1) * ((1 << 31) / ((key >> 33) + 1)))
    return b


def user_digest(user_id: str) -> int:
    """The 64-bit key a user id hashes to (BLAKE2b, 8 bytes, big-endian)."""
    raw = user_id.encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "big")


def shard_of(user_id: str, shards: int) -> int:
    """The shard (0..shards-1) user ``user_id`` lives in."""
    return 0 if shards == 1 else jump_hash(user_digest(user_id), shards)


def _slot(tag: str) -> int:
    return key_slot(QueueKeys("q", tag).prefix.encode())


def choose_tags(queue: str, shards: int, have: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The tags of shards 1..shards-1: ``have`` (the existing ones, kept) and new ones
    whose slots sit at i/shards of the slot space past shard 0's."""
    base = _slot(queue)
    tags = list(have)
    for index in range(len(have) + 1, shards):
        target = (base + index * REDIS_CLUSTER_HASH_SLOTS // shards) % REDIS_CLUSTER_HASH_SLOTS
        best, best_gap = 0, REDIS_CLUSTER_HASH_SLOTS
        for salt in range(SALT_TRIES):
            gap = abs(_slot(shard_tag(queue, index, salt)) - target)
            gap = min(gap, REDIS_CLUSTER_HASH_SLOTS - gap)
            if gap < best_gap:
                best, best_gap = salt, gap
                if gap <= SLOT_GAP:
                    break
        tags.append(shard_tag(queue, index, best))
    return tuple(tags)
