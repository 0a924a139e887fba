"""Every Redis key fairque uses, built in one place.

All keys of one queue share the hash tag ``{<queue>}``, so a queue lives in one
cluster slot and every script can touch all of its keys atomically.  A Lua script's
binding of ``KEYS`` names, by the attribute names of ``QueueKeys``, every fixed key it
touches (what each holds is said here, once); the client passes those keys, after the
tagged prefix (``fq:{<queue>}:``) in ``KEYS[1]``.
Per-task and per-user keys are derived from the prefix in ``lua/includes/keys.lua``
alone, with the same suffixes as this module (``tests/core/test_scripts.py`` compares them).
"""

from __future__ import annotations

from dataclasses import dataclass

from fairque.errors import ConfigError

#: Longest queue name accepted.
MAX_QUEUE_NAME = 128
#: The one key outside every queue: the set of queue names this server holds, written
#: by the clients beside a push (a plain SADD, so cluster-safe) and read by discovery
#: (``fairque queues``, ``GET /v1/queues``, ``fairque serve`` with no queue named).
QUEUE_REGISTRY = "fq:queues"


def validate_queue_name(queue: str) -> str:
    """Return ``queue`` if it can be used inside a hash tag.

    Raises:
        ConfigError: the name is empty, too long, or contains braces or whitespace.
    """
    if not isinstance(queue, str) or not queue:
        raise ConfigError("queue name must be a non-empty string")
    if len(queue) > MAX_QUEUE_NAME:
        raise ConfigError(f"queue name is longer than {MAX_QUEUE_NAME} characters")
    if any(c in queue for c in "{}") or any(c.isspace() for c in queue):
        raise ConfigError(f"queue name {queue!r} must not contain braces or whitespace")
    if not queue.isascii() and any("\ud800" <= c <= "\udfff" for c in queue):
        raise ConfigError("queue name must be valid Unicode (it holds a lone surrogate)")
    return queue


def shard_tag(queue: str, index: int, salt: int) -> str:
    """The hash tag of shard ``index`` (>= 1) of a sharded queue: ``<queue>{<index>.<salt>``.

    A queue name holds no brace, so no queue's own tag can equal a shard's; the salt
    picks the tag's cluster slot (``fairque.core.shards``). Shard 0 is the queue's own
    tag, so an unsharded queue's keys are shard 0's.
    """
    return f"{queue}{{{index}.{salt}"


@dataclass(frozen=True)
class QueueKeys:
    """The fixed keys of one queue partition (an unsharded queue, or one shard of a
    sharded queue) plus builders for per-task and per-user keys."""

    queue: str
    #: the hash tag of the partition (None: the queue name, i.e. shard 0)
    tag: str | None = None

    @property
    def prefix(self) -> str:
        """The hash-tagged prefix every key of the partition starts with."""
        return f"fq:{{{self.tag if self.tag is not None else self.queue}}}:"

    def _k(self, suffix: str) -> str:
        return self.prefix + suffix

    # fixed keys ---------------------------------------------------------------
    @property
    def ring(self) -> str:
        """Sorted set of users with ready work, scored by last-served virtual time."""
        return self._k("ring")

    @property
    def delayed(self) -> str:
        """SCHEDULED registry: task id -> due time (ms)."""
        return self._k("delayed")

    @property
    def leases(self) -> str:
        """STARTED registry: task id -> lease deadline (ms)."""
        return self._k("leases")

    @property
    def queued(self) -> str:
        """QUEUED registry: task id -> enqueue time (ms)."""
        return self._k("queued")

    @property
    def deferred(self) -> str:
        """DEFERRED registry: task id -> push time (ms)."""
        return self._k("deferred")

    @property
    def finished(self) -> str:
        """FINISHED registry: task id -> expiry time (ms)."""
        return self._k("finished")

    @property
    def failed(self) -> str:
        """FAILED registry: task id -> expiry time (ms)."""
        return self._k("failed")

    @property
    def canceled(self) -> str:
        """CANCELED registry: task id -> expiry time (ms)."""
        return self._k("canceled")

    @property
    def ends(self) -> str:
        """Ended tasks kept for a while: ``'<user>\\n<name>\\n<id>'`` -> expiry time (ms).

        The task's data expires by itself; ``maintain`` then takes the task out of its
        user's and its name's index (``user_index``, ``name_index``) from this entry.
        """
        return self._k("ends")

    @property
    def meta(self) -> str:
        """Hash of the queue's clocks (ring clock, lease sequence, fair floor, the 'due'
        hint) and settings (its fairness mode and the features it uses now: 'counted',
        'group_caps', 'group_backlogs', each set and cleared by the script that owns
        it), field by field in ``fairque.core.meta.META``."""
        return self._k("meta")

    @property
    def stats(self) -> str:
        """Hash of throughput counters (pushed, popped, completed, ...): the scripts count
        what only they see (reclaims, cancels, lost leases); the processes that lease and
        complete flush their counts and histograms into it (``fairque.core.tally``)."""
        return self._k("stats")

    @property
    def weights(self) -> str:
        """Hash user -> round-robin weight (turns per round)."""
        return self._k("weights")

    @property
    def caps(self) -> str:
        """Hash user -> maximum tasks in flight."""
        return self._k("caps")

    @property
    def groups(self) -> str:
        """Hash user -> its group (``set_user_limits(group=)``); mirrored, with the
        user's weight, in its tenant hash, where the lease path reads it."""
        return self._k("groups")

    @property
    def shares(self) -> str:
        """Hash user -> its share of worker time, ``'<floor> <ceiling>'`` (fractions;
        ``set_user_limits(floor=, ceiling=)``); mirrored in its tenant hash."""
        return self._k("shares")

    @property
    def group_caps(self) -> str:
        """Hash group -> the most slots its tenants' leases hold at once
        (``set_group_limits(max_in_flight=)``); mirrored in the group's hash."""
        return self._k("group_caps")

    @property
    def group_shares(self) -> str:
        """Hash group -> its share, ``'<floor> <ceiling>'`` (``set_group_limits``);
        mirrored in the group's hash."""
        return self._k("group_shares")

    @property
    def group_weights(self) -> str:
        """Hash group -> its weight (``set_group_limits``); mirrored in the group's
        hash."""
        return self._k("group_weights")

    @property
    def turns(self) -> str:
        """Hash user -> turns used in the current round (weighted users only)."""
        return self._k("turns")

    @property
    def capped(self) -> str:
        """Set of users with ready work held out of the ring by their cap."""
        return self._k("capped")

    @property
    def intake(self) -> str:
        """List of plain tasks pushed one at a time and not yet placed (in the QUEUED
        registry, their indexes and their lanes), oldest first
        (``'<push ms>\\n<priority>\\n<user>\\n<name>\\n<id>'``): a lease call, ``stats``,
        ``maintain`` and ``place`` place them."""
        return self._k("intake")

    @property
    def aside(self) -> str:
        """Set of task names with tasks set aside by a worker that does not handle them
        (``aside_users`` holds, per name, the users those tasks belong to)."""
        return self._k("aside")

    @property
    def backlog(self) -> str:
        """Hash user -> its tasks waiting to run (QUEUED, SCHEDULED or DEFERRED), kept by
        the scripts that move tasks in and out of those states; a push checks it
        against the user's quota. A user with none has no field. The field ``"\0groups"``
        (no user id holds a control character) marks a queue that also keeps its
        groups' backlogs, in each group's hash (``backlog``): set with the first group
        quota (``set_group_limits(max_queued=)``). The field ``'<user>\0b'`` holds the
        bytes the user's tasks hold (payloads, what ended records keep), counted under
        a byte quota (``max_bytes``)."""
        return self._k("backlog")

    @property
    def quotas(self) -> str:
        """Hash user -> its backlog quota (``max_queued``), over the queue's default;
        ``'<user>\0b'`` -> its byte quota (``max_bytes``); with the field ``"\0groups"``
        as in ``backlog``, so a push of a grouped tenant's task looks for its group's
        quota."""
        return self._k("quotas")

    @property
    def dedup(self) -> str:
        """Hash ``'<user>\0<dedup key>'`` -> the id of the task that user pushed with
        that key (``Dedup``): a push with the key merges into it while it waits. A
        name whose task no longer waits is stale: a push replaces it, ``maintain``
        drops it."""
        return self._k("dedup")

    @property
    def wake(self) -> str:
        """List of wake-up tokens: push adds some, idle workers block on it."""
        return self._k("wake")

    @property
    def active(self) -> str:
        """Sorted set user -> when (ms) one of its tasks was last leased: the tenants
        ``/metrics`` names one by one (the most recent), and the ones ``maintain``
        forgets after a month without a lease (their ``tenant`` hash with them)."""
        return self._k("active")

    @property
    def workers(self) -> str:
        """Hash worker id -> JSON description (host, pid, started, in-flight...)."""
        return self._k("workers")

    @property
    def workers_seen(self) -> str:
        """Sorted set worker id -> last heartbeat (ms), to expire dead workers."""
        return self._k("workers:seen")

    @property
    def schedules(self) -> str:
        """Sorted set schedule id -> next slot (ms); 0: to be planned, +inf: paused."""
        return self._k("schedules")

    @property
    def schedules_wake(self) -> str:
        """List the leading scheduler blocks on; a changed schedule pushes a token."""
        return self._k("schedules:wake")

    @property
    def scheduler_lock(self) -> str:
        """The leading scheduler's token, with a TTL its holder renews."""
        return self._k("scheduler:lock")

    @property
    def scheduler_handover(self) -> str:
        """A token the leading scheduler pushes as it releases the lock: a waiting
        scheduler blocks on it and takes over at once (kept one minute)."""
        return self._k("scheduler:handover")

    @property
    def scheduler_released(self) -> str:
        """The token that last released the scheduler lock (kept one minute)."""
        return self._k("scheduler:released")

    @property
    def constraints(self) -> str:
        """Hash constraint id -> its definition (JSON, ``fairque.constraints.model``)."""
        return self._k("constraints")

    @property
    def constraint_due(self) -> str:
        """Sorted set constraint bucket -> when (ms) its parked tasks may go back to
        their lanes (a rate limit's next slot, a concurrency limit's earliest lease
        deadline, or now once a slot frees)."""
        return self._k("constraints:due")

    @property
    def shards(self) -> str:
        """List of a sharded queue's shard tags, shard 1 first (shard 0's tag is the
        queue's own); kept in shard 0 only. Absent: the queue has one shard."""
        return self._k("shards")

    # derived keys -------------------------------------------------------------
    def task(self, task_id: str) -> str:
        """Hash holding one task."""
        return self._k(f"task:{task_id}")

    def critical(self, user_id: str) -> str:
        """A user's critical lane (list, FIFO)."""
        return self._k(f"crit:{user_id}")

    def normal(self, user_id: str) -> str:
        """A user's normal lane (sorted set by virtual arrival)."""
        return self._k(f"norm:{user_id}")

    def tenant(self, user_id: str) -> str:
        """Hash of what a user was served: its start tag while it is out of the ring
        (``tag``, time-fair mode), its run-time estimate (``est``, ms), the worker time
        its leases held (``busy_us``, us), its outcomes (``done``, ``failed``), its
        wait histogram (``wait_ms:<i>``, ``wait_ms:sum``, as the queue's) and when its
        ``active`` score last moved (``seen``, ms: at most once a second). A member
        of a group also holds its group (``group``) and weight (``weight``) as
        ``set_user_limits`` set them (on a counted queue, every user's weight; a share
        as ``share``), and, while it is in the ring, what it adds to the ring's sums
        (``counted``: ``'<weight> <group>'``, see ``ring_count.lua``)."""
        return self._k(f"tenant:{user_id}")

    def group(self, group_id: str) -> str:
        """Hash of a group: its weight, share and cap (``weight``, ``share``, ``cap``,
        mirrored from ``group_weights``, ``group_shares`` and ``group_caps``), its backlog
        quota and backlog (``quota``, ``backlog``: kept on a queue with group quotas), the
        sum of the weights of its tenants in the ring (``active``), which the group's
        weight is shared over, and what it adds to the ring's top-level weights while
        it has tenants there (``counted``)."""
        return self._k(f"group:{group_id}")

    def group_held(self, group_id: str) -> str:
        """A group's unexpired leases (every lease of a tenant in the group, on a queue
        with group caps), for its in-flight cap: task id -> lease deadline (ms), one
        member per slot as in ``held``; the task's ``gheld`` field names the group."""
        return self._k(f"gheld:{group_id}")

    def group_capped(self, group_id: str) -> str:
        """Set of a group's tenants with ready work held out of the ring by the group's
        in-flight cap (let back in as its leases end)."""
        return self._k(f"gcapped:{group_id}")

    def user_index(self, user_id: str) -> str:
        """Every task of a user, in any state: task id -> creation time (ms).

        Written by push, cleaned when the task is deleted or expires (see ``ends``);
        ``list_tasks`` walks it to list one user's tasks.
        """
        return self._k(f"uidx:{user_id}")

    def name_index(self, name: str) -> str:
        """Every task of a name, in any state: task id -> creation time (ms)."""
        return self._k(f"nidx:{name}")

    def deps_waiting(self, task_id: str) -> str:
        """Set of upstream task ids that ``task_id`` still waits for."""
        return self._k(f"deps:waiting:{task_id}")

    def deps_blocked(self, task_id: str) -> str:
        """Set of downstream task ids that ``task_id`` blocks."""
        return self._k(f"deps:blocked:{task_id}")

    def held(self, user_id: str) -> str:
        """A user's unexpired leases: task id -> lease deadline (ms); a task of cost N
        holds N - 1 more members (``<id>\\0<k>``, k = 2..N: ``slot_members.lua``).

        A user's in-flight count (in slots) is ``ZCOUNT held (now +inf``, so a lease
        that expires or whose acknowledgement is lost frees its slots by itself.
        """
        return self._k(f"held:{user_id}")

    def worker_held(self, worker_id: str) -> str:
        """Sorted set of a bounded worker's leases (``'<id> <token>'`` -> the lease's
        first deadline), counted against its bound from the tasks themselves (a lease
        request's ``max_held``); kept a day after its last lease request."""
        return self._k(f"wheld:{worker_id}")

    def kept(self, user_id: str) -> str:
        """Hash task id -> the bytes an ended task of the user keeps (a FINISHED task's
        result, a FAILED or CANCELED one's payload) and counts against its byte quota
        until its record expires (``maintain`` takes them back) or is deleted."""
        return self._k(f"kept:{user_id}")

    def fetch(self, request_id: str) -> str:
        """What one request did, kept for its resend: a lease request's (id, token)
        pairs, so it returns them again; ``'merged'`` for a push that merged a payload
        into a waiting task, so it merges nothing again."""
        return self._k(f"fetch:{request_id}")

    def gone(self, task_id: str) -> str:
        """Tombstone of a task that ended and was kept less than a minute: ``'<state> <op>'``.

        It lives for 60 s (the replay window), so a resent push or acknowledgement of a
        task whose data is already gone is still recognised as a resend.
        """
        return self._k(f"gone:{task_id}")

    def watch(self, task_id: str) -> str:
        """Marker that a client waits in ``result()`` for ``task_id`` to end."""
        return self._k(f"watch:{task_id}")

    def done(self, task_id: str) -> str:
        """List the ending script pushes a token to, waking ``result()`` waiters."""
        return self._k(f"done:{task_id}")

    def stops(self, worker_id: str) -> str:
        """List of ``'<task id> <lease token>'``: leases of ``worker_id`` a cancel took
        away. The worker blocks on it (``wait_for_cancel``) and stops those handlers at
        once; a minute after the last cancel it expires (a worker away longer learns of
        the cancel from its next heartbeat)."""
        return self._k(f"stops:{worker_id}")

    def flushed(self, process: str) -> str:
        """The last metrics flush of one process (``flush_metrics``): its sequence
        number, so a resent flush counts nothing again; kept a day after the last."""
        return self._k(f"flushed:{process}")

    def schedule(self, schedule_id: str) -> str:
        """Hash of one schedule: definition, payload, cursor, counters (fairque.schedules.model)."""
        return self._k(f"schedule:{schedule_id}")

    def xcom(self, key: str) -> str:
        """A value shared between tasks of a workflow (with a TTL)."""
        return self._k(f"xcom:{key}")

    def constraint_rate(self, bucket: str) -> str:
        """A constraint bucket's rate state: its GCRA theoretical arrival time (us).

        A bucket is the constraint id, or ``'<id>:<user>'`` for a per-user constraint.
        """
        return self._k(f"crate:{bucket}")

    def constraint_held(self, bucket: str) -> str:
        """A constraint bucket's leases: task id -> lease deadline (ms), one member per
        slot as in ``held``; its use is the count of unexpired ones, so a dead worker's
        slots free by themselves."""
        return self._k(f"cheld:{bucket}")

    def constraint_parked(self, bucket: str) -> str:
        """Tasks passed over because the bucket was at its limit: id -> their place in
        the bucket's fair order (a global bucket: the start tag ``constraint_order``
        gave them; a per-user or set-aside bucket: their lane score)."""
        return self._k(f"cpark:{bucket}")

    def constraint_order(self, bucket: str) -> str:
        """A global bucket's fair order (start-time fair queueing over what the limit
        lets through): field ``''`` -> the start tag of the last task it let start, a
        user -> the tag its next task starts at (at least the first). Deleted when the
        bucket's parked set empties."""
        return self._k(f"cord:{bucket}")

    def aside_users(self, name: str) -> str:
        """Set of the users with tasks named ``name`` set aside (each user's tasks wait in
        the parked set of the bucket ``'~<user>:<name>'``)."""
        return self._k(f"asu:{name}")

    def constraint_buckets(self, constraint_id: str) -> str:
        """Set of the buckets a constraint has used (its per-user buckets)."""
        return self._k(f"cbk:{constraint_id}")
