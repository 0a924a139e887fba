"""What the sync and async clients share: operations, options, limits, error mapping,
and the control flow of every method that takes more than one round trip.

A method that needs several round trips (``result`` waits, ``purge`` and
``cleanup_dependencies`` loop, ``wait_and_pop`` pipelines) is written once here as a
*flow*: a generator that yields what to send and receives the answer. It yields a
``Call`` to get its parsed answer (a call that fails is raised inside the flow, at its
``yield``), or a tuple of calls to send them as one pipeline and get their raw replies,
errors included (``_pipeline`` parses them). ``run_flow`` drives a flow with the
blocking client, ``run_flow_async`` with the asyncio one; neither knows any method,
and the clients add nothing but the sending.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable, Generator, Iterable, Iterator, Sequence
from typing import Any, NoReturn, TypeAlias, TypeVar

import redis
from redis.exceptions import NoScriptError, ResponseError

from fairque.common.urls import check_url, url_errors
from fairque.core.checks import check_int, check_timeout, check_wait
from fairque.core.ops import Operations
from fairque.core.options import QueueOptions
from fairque.core.records import Call, EncodedResult, Leased, LeaseRequest, request_id
from fairque.errors import (
    FairqueError,
    ResultTimeout,
    ServerError,
    ServerFull,
    StaleConstraints,
    TaskCanceled,
    TaskFailed,
    script_error,
)
from fairque.models import Task, TaskOutcome, TaskPage, TaskState

T = TypeVar("T")

#: The most placement calls a read makes first (500 tasks each): a read after a burst of
#: a million pushes with no worker running places the first 50,000 and reads.
PLACE_ROUNDS = 100

#: What a flow sends next: one call, or several sent as one pipeline (raw replies back).
Step: TypeAlias = Call[Any] | tuple[Call[Any], ...]
#: A method's control flow: yields steps, receives their answers, returns its result.
Flow = Generator[Step, Any, T]


def run_flow(
    flow: Flow[T],
    run: Callable[[Call[Any]], Any],
    send_pipeline: Callable[[Sequence[Call[Any]]], list[Any]],
) -> T:
    """Drive ``flow`` with a blocking client; returns what the flow returns."""
    try:
        step = next(flow)
        while True:
            try:
                answer = run(step) if isinstance(step, Call) else send_pipeline(step)
            except Exception as exc:
                step = flow.throw(exc)
            else:
                step = flow.send(answer)
    except StopIteration as stop:
        result: T = stop.value
        return result


async def run_flow_async(
    flow: Flow[T],
    run: Callable[[Call[Any]], Awaitable[Any]],
    send_pipeline: Callable[[Sequence[Call[Any]]], Awaitable[list[Any]]],
) -> T:
    """Drive ``flow`` with an asyncio client; returns what the flow returns."""
    try:
        step = next(flow)
        while True:
            try:
                answer = await (run(step) if isinstance(step, Call) else send_pipeline(step))
            except Exception as exc:
                step = flow.throw(exc)
            else:
                step = flow.send(answer)
    except StopIteration as stop:
        result: T = stop.value
        return result


#: seconds between two reads of the shard layout by one client (``QueueBase._upkeep_flow``)
LAYOUT_EVERY = 5.0
#: seconds between two registry writes of one client (``QueueBase._listing_due``)
LIST_EVERY = 60.0
#: seconds before a registry write refused by a full server is tried again
FULL_RETRY = 5.0


def replayable_tasks(tasks: Iterable[Any]) -> Iterable[Any]:
    """``tasks`` in a form that can be read twice (a push may be built again)."""
    return tuple(tasks) if isinstance(tasks, Iterator) else tasks


def translate_error(exc: ResponseError) -> FairqueError | ResponseError:
    """Turn a script's ``FQERR <code> <detail>`` error reply into its exception."""
    message = str(exc)
    marker = message.find("FQERR ")
    if marker < 0:
        return exc
    code_text, _, detail = message[marker + 6 :].partition(" ")
    try:
        code = int(code_text)
    except ValueError:
        return exc
    return script_error(code, detail.split(" script:", 1)[0].strip())


#: what a refused push tells the caller to do
FULL_ADVICE = (
    "the server is at its memory limit (maxmemory) and refuses new work; workers keep"
    " draining the queue, so retry later, or raise maxmemory, shorten result_ttl, or"
    " bound the noisy tenant with a backlog quota (max_queued) or a byte quota (max_bytes)"
)


def server_error(exc: ResponseError) -> ServerError:
    """The ``ServerError`` for a refusal by the server: ``ServerFull`` at its memory limit
    (the server's reply starts with ``OOM``)."""
    message = str(exc)
    if isinstance(exc, redis.exceptions.OutOfMemoryError) or message.startswith("OOM "):
        return ServerFull(f"{FULL_ADVICE} (server: {message.split(' script:', 1)[0]})")
    return ServerError(message)


def blocking_limit(client: Any) -> float | None:
    """The longest blocking wait ``client`` allows before its socket timeout fires.

    redis-py clients may carry a ``socket_timeout`` (redis-py 8 sets 5 s by default);
    a BLPOP or BLMOVE longer than that would fail with a TimeoutError, so blocking
    waits are cut into pieces shorter than it.
    """
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", None)
    if kwargs is None:
        kwargs = getattr(getattr(client, "nodes_manager", None), "connection_kwargs", None) or {}
    # redis-py 8 keeps its 5 s default out of connection_kwargs; assume it when unsure
    timeout = kwargs.get("socket_timeout", kwargs.get("orig_socket_timeout", 5.0))
    if not timeout:
        return None
    return max(float(timeout) - 0.5, float(timeout) / 2)


def is_cluster_url(url: str) -> bool:
    """Ask the server at ``url`` whether it runs in cluster mode."""
    probe = redis.Redis.from_url(url)
    try:
        info = probe.info("cluster")
        return bool(info.get("cluster_enabled"))
    finally:
        probe.close()


def connect(
    url: str,
    cluster: bool | None,
    options: dict[str, Any],
    single: Callable[[str], Any],
    clustered: Callable[[str], Any],
) -> Any:
    """A client for ``url`` made by ``single`` or, for a cluster, ``clustered``.

    The options and the URL are checked first, so a bad call fails before connecting;
    a cluster is detected unless ``cluster`` says otherwise.
    """
    QueueOptions.build(**options)
    url = check_url(url)
    with url_errors(url):
        if cluster is None:
            cluster = is_cluster_url(url)
        return clustered(url) if cluster else single(url)


class PushCheck:
    """A push checked without a server: the errors a push of one task raises before
    it sends anything, and the bytes it sends (the command line checks a whole task
    file this way before it connects)."""

    def __init__(self, queue: str, options: QueueOptions) -> None:
        self._ops = Operations(queue, options)

    def size(self, task: Task, delay: float | None = None) -> int:
        """The bytes ``task`` adds to a push.

        Raises:
            ValidationError: the push would be refused (the problems name the fields).
        """
        call = self._ops.push_many([task], [delay])
        return sum(len(a) if isinstance(a, bytes) else len(str(a).encode()) for a in call.args)

    def batch(self, tasks: Sequence[Task], delays: Sequence[float | None]) -> None:
        """Check ``tasks`` as one atomic push (its limits, dependency cycles).

        Raises:
            ValidationError: the push would be refused.
            DependencyCycleError: the tasks' dependencies form a cycle.
        """
        self._ops.push_many(tasks, delays)


class QueueBase:
    """State and control flow common to ``FairQueue`` and ``AsyncFairQueue``; they
    only add I/O."""

    def __init__(self, client: Any, queue: str, *, _tag: str | None = None, **options: Any) -> None:
        self.ops = Operations(queue, QueueOptions.build(**options), _tag)
        self._block_limit = blocking_limit(client)
        #: where a bounded ``cleanup_dependencies`` stopped (its next call resumes there)
        self._cleanup_offset = 0
        #: when this client names its queue in the server's registry again (monotonic)
        self._list_at = 0.0

    @property
    def queue(self) -> str:
        """The queue name."""
        return self.ops.queue

    @property
    def options(self) -> QueueOptions:
        """The validated queue options."""
        return self.ops.options

    def encode_result(self, result: Any) -> EncodedResult:
        """``result`` serialized once with the queue's serializer, to pass to
        ``complete`` (or ``complete_and_pop``) as it is.

        Raises:
            SerializationError: the serializer cannot represent ``result``.
        """
        return self.ops.encode_result(result)

    def _bounded(self, seconds: float) -> float:
        """``seconds``, cut to what one blocking call may last on this client."""
        seconds = check_wait(seconds)
        limit = self._block_limit
        return seconds if limit is None or seconds <= limit else limit

    def _reraise(self, exc: ResponseError) -> NoReturn:
        """Raise the fairque exception a script's error reply stands for, else ``exc``.
        An unknown id reads as everywhere else: ``no task 'ID' in queue 'Q'``."""
        err = translate_error(exc)
        if err is exc:
            raise server_error(exc) from exc
        detail = str(err)
        for kind in ("task", "schedule"):
            if detail.startswith(f"no {kind} "):
                err = type(err)(f"no {kind} {detail[len(kind) + 4 :]!r} in queue {self.queue!r}")
        raise err from None

    @staticmethod
    def _command(call: Call[Any]) -> tuple[Any, ...]:
        """The command ``call`` sends when it is part of a pipeline (scripts by SHA)."""
        if call.script is None:
            return (call.args[0], *call.keys, *call.args[1:])
        return ("EVALSHA", call.script.sha, len(call.keys), *call.keys, *call.args)

    def _listing_due(self) -> Call[int] | None:
        """The registry write a push or a worker's heartbeat sends first: once per
        ``LIST_EVERY`` seconds per client (a purge elsewhere is mended within that)."""
        now = time.monotonic()
        if now < self._list_at:
            return None
        self._list_at = now + LIST_EVERY
        return self.ops.list_queue()

    def _registry_flow(self, call: Call[int] | None) -> Flow[None]:
        """Send a registry write (``call``; None: nothing is due). A refusal by an ACL
        rule without the registry key (one written before it existed) stops this
        client's writes for good; any other failure raises."""
        if call is None:
            return
        try:
            yield call
        except ServerFull:
            # the queue is named again once memory came back; the call it rides with
            # (a push that got in, a heartbeat) must not fail for it
            self._list_at = time.monotonic() + FULL_RETRY
        except ServerError as exc:
            if not isinstance(exc.__cause__, redis.exceptions.NoPermissionError):
                self._list_at = 0.0
                raise
            self._list_at = float("inf")

    # flows ----------------------------------------------------------------------
    def _pipeline(self, calls: tuple[Call[Any], ...]) -> Flow[list[Any]]:
        """Send ``calls`` as one pipeline (the server runs them in order, back to back);
        their parsed answers. A call whose script the server lost is sent again alone;
        a single call is sent as itself (no pipeline to build)."""
        if len(calls) == 1:
            return [(yield calls[0])]
        raws = yield calls
        out: list[Any] = []
        for call, raw in zip(calls, raws, strict=True):
            if isinstance(raw, NoScriptError):
                out.append((yield call))
            elif isinstance(raw, ResponseError):
                self._reraise(raw)
            elif isinstance(raw, Exception):  # a cluster pipeline's lost connection
                raise raw
            else:
                out.append(call.parse(raw))
        return out

    def _push_flow(self, build: Callable[[], Call[T]]) -> Flow[T]:
        """A push, matched against the queue's constraints as this client knows them;
        when they changed since it read them (the script refuses the push), read them
        and build the push again."""
        for _ in range(3):
            try:
                pushed: T = yield build()
                return pushed
            except StaleConstraints:
                self.ops.codec.constraints = (yield self.ops.constraints(usage=False))[0]
        last: T = yield build()
        return last

    def _repush_flow(self, build: Callable[[], Call[T]]) -> Flow[T]:
        """``_push_flow`` after the script refused a push sent without it (stale
        constraints): read the constraints first."""
        self.ops.codec.constraints = (yield self.ops.constraints(usage=False))[0]
        pushed: T = yield from self._push_flow(build)
        return pushed

    def _settle_flow(self, leased: Leased) -> Flow[Leased]:
        """Fail, each on its own, the leased tasks that could not be decoded."""
        for call in self.ops.fail_undecodable(leased):
            with contextlib.suppress(FairqueError):  # e.g. its lease was reclaimed meanwhile
                yield call
        return leased

    def _wait_and_pop_flow(self, timeout: float, request: LeaseRequest) -> Flow[Leased]:
        """``wait_and_pop``: the blocking wait with the lease pipelined behind it."""
        wait = self.ops.wait_for_work(self._bounded(timeout))
        _, leased = yield from self._pipeline((wait, self.ops.pop(request)))
        return (yield from self._settle_flow(leased))

    def _outcome_flow(
        self, task_id: str, timeout: float, consume: bool
    ) -> Flow[TaskOutcome | None]:
        """``outcome``: read it; while the task is pending, block on its end signal."""
        check_timeout(timeout)
        deadline = time.monotonic() + timeout
        req = request_id() if consume else ""
        out: TaskOutcome | None = yield self.ops.result(task_id, consume, timeout, req)
        while out is not None and not out.ended:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return out
            yield self.ops.wait_done(task_id, self._bounded(remaining))
            out = yield self.ops.result(task_id, consume, max(remaining, 0.001), req)
        return out

    def _result_flow(self, task_id: str, timeout: float, consume: bool) -> Flow[Any]:
        """``result``: the outcome's result; a failure or a cancellation raised."""
        out = yield from self._outcome_flow(task_id, timeout, consume)
        if out is None:
            return None
        if out.state is TaskState.FAILED:
            kind = f" ({out.reason})" if out.reason else ""
            raise TaskFailed(f"task {task_id} failed{kind}: {out.error or ''}")
        if out.state is TaskState.CANCELED:
            error = out.error
            raise TaskCanceled(f"task {task_id} was canceled{': ' + error if error else ''}")
        if out.state is not TaskState.FINISHED:
            raise ResultTimeout(f"task {task_id} is still {out.state.value} after {timeout:g}s")
        return out.result

    def _cleanup_dependencies_flow(self, batch: int, passes: int | None) -> Flow[int]:
        """``cleanup_dependencies``: bounded passes until the scan wraps around, or at
        most ``passes`` of them, from where this client's last call stopped."""
        if passes is not None:
            check_int(passes, "passes", 1, 1_000_000)
        offset, canceled, done = self._cleanup_offset, 0, 0
        n: int
        while passes is None or done < passes:
            _, n, offset = yield self.ops.cleanup_dependencies(offset, batch)
            self._cleanup_offset = offset
            canceled += n
            done += 1
            if offset == 0:
                break
        return canceled

    def _placed_flow(self) -> Flow[None]:
        """Place the intake (bounded calls, at most ``PLACE_ROUNDS``) before a read that
        needs every task in its registry, its indexes and its lane."""
        for _ in range(PLACE_ROUNDS):
            _, left = yield self.ops.place()
            if left == 0:
                return

    def _list_tasks_flow(
        self, state: TaskState | str | None, user_id: str | None, name: str | None,
        limit: int, cursor: str | None,
    ) -> Flow[TaskPage]:  # fmt: skip
        """``list_tasks``: place the intake, then read the page."""
        call = self.ops.list_tasks(state, user_id, name, limit, cursor)  # checks first
        yield from self._placed_flow()
        page: TaskPage = yield call
        return page

    def _purge_flow(self, batch: int) -> Flow[int]:
        """``purge``: bounded rounds until nothing is left."""
        total = 0
        deleted: int
        while True:
            deleted, remaining = yield self.ops.purge(batch)
            total += deleted
            if remaining == 0:
                break
        yield from self._registry_flow(self.ops.unlist_queue())
        self._list_at = 0.0  # this client's next push names the queue again
        return total
