"""One structured line per change made through the service, on the ``fairque.audit``
logger: who (the token's name, the peer), what (the operation), where (queue, tenant,
task) and how it ended (the status). A request refused for its role or scope (403) is
recorded too, whatever it asked for; reads and a worker's leases and outcomes are not
(they are the service's traffic, not changes an operator looks for).

Each line is one JSON object, so a log pipeline reads it without a pattern.
"""

from __future__ import annotations

import json
import logging

log = logging.getLogger("fairque.audit")


def record(
    action: str,
    *,
    token: str,
    peer: str,
    status: int,
    queue: str | None = None,
    tenant: str | None = None,
    task: str | None = None,
) -> None:
    """Log one change (or a refusal) as a JSON object."""
    line = {"audit": action, "token": token, "peer": peer, "status": status}
    line.update(
        {k: v for k, v in (("queue", queue), ("tenant", tenant), ("task", task)) if v is not None}
    )
    log.info(json.dumps(line, ensure_ascii=False, separators=(",", ":")))
