"""The queue server's memory as it reports it: use, limit and eviction policy per node."""

from __future__ import annotations

import logging
from dataclasses import dataclass

#: what a server's eviction policy drops at its memory limit, by ``maxmemory-policy``
_LOSSES = {
    "allkeys": "any key: queued tasks, leases and the queue's own state, silently",
    "volatile": (
        "keys with a TTL: ended tasks and their results before their TTL, the markers"
        " that make resent calls safe, and the scheduler's lock"
    ),
}


@dataclass(frozen=True)
class NodeMemory:
    """One server's (or cluster node's) memory as it reports it (``INFO memory``)."""

    #: the node, ``host:port`` ('' for the one server of a standalone client)
    node: str
    used_bytes: int
    #: ``maxmemory`` (0: no limit)
    max_bytes: int
    #: ``maxmemory-policy``
    policy: str

    @property
    def share(self) -> float | None:
        """Memory in use as a share of the limit (None: no limit)."""
        return self.used_bytes / self.max_bytes if self.max_bytes else None

    @property
    def evicting(self) -> bool:
        """Whether the server drops keys at its limit instead of refusing writes."""
        return self.policy.split("-", 1)[0] in _LOSSES

    def warning(self) -> str | None:
        """What an evicting policy would lose, and what to set instead (None: nothing)."""
        if not self.evicting:
            return None
        where = f"the server {self.node}" if self.node else "the server"
        return (
            f"{where} evicts keys at its memory limit (maxmemory-policy {self.policy}):"
            f" it would drop {_LOSSES[self.policy.split('-', 1)[0]]}. Set maxmemory-policy"
            " noeviction: fairque then refuses pushes at the limit while workers drain"
        )


@dataclass(frozen=True)
class MemoryReport:
    """The queue server's memory: each node of a cluster, or the one server."""

    nodes: tuple[NodeMemory, ...]

    @property
    def share(self) -> float | None:
        """The fullest node's memory in use as a share of its limit (None: no limit)."""
        shares = [n.share for n in self.nodes if n.share is not None]
        return max(shares) if shares else None

    @property
    def evicting(self) -> bool:
        """Whether any node drops keys at its limit."""
        return any(n.evicting for n in self.nodes)

    def warnings(self) -> list[str]:
        """One warning per node whose policy would lose tasks."""
        return [w for w in (n.warning() for n in self.nodes) if w]

    def log_to(self, logger: logging.Logger, who: str = "") -> None:
        """Log the summary at INFO and each warning at WARNING, each followed by ``who``."""
        logger.info("%s%s", self.summary(), who)
        for warning in self.warnings():
            logger.warning("%s%s", warning, who)

    def summary(self) -> str:
        """One line: memory in use, of the limit, and the policy (the fullest node)."""
        if not self.nodes:
            return "server memory: unknown"
        node = max(self.nodes, key=lambda n: n.share or 0.0)
        used = _mib(sum(n.used_bytes for n in self.nodes))
        if node.max_bytes:
            where = f" (fullest node {node.node})" if len(self.nodes) > 1 else ""
            share = f"{node.share:.0%} of its limit{where}"
        else:
            share = "no limit (maxmemory 0)"
        return f"server memory: {used} in use, {share}; maxmemory-policy {node.policy}"


def _mib(n: int) -> str:
    return f"{n / 1_048_576:.1f} MiB"
