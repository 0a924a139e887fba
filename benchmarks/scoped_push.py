"""What a token's scope costs a push through the service: push latency with a token of
the whole queue, one held to a tenant, and one held to a queue, in the same run.

Starts a private Valkey and ``fairque serve`` (a separate process, as deployed) with the
three tokens, then pushes one task per request, one request at a time, taking the tokens
in turn (so drift on a busy machine falls on all three alike), ``--rounds`` times each.
A tenant's pushes are taken both without a task id (the queue makes one) and with one
(kept under the tenant: ``4:acme:<id>``). Prints one JSON document: p50 and p99 per
token in microseconds, and each one's p50 as a ratio of the whole-queue token's.

Usage::

    uv run python benchmarks/scoped_push.py [--rounds 3000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from served import machine, start_service

from fairque.cli.embedded import EmbeddedServer, free_port

TOKENS = {
    "whole": ("producer", {}),
    "tenant": ("producer", {"tenants": ["acme"]}),
    "queue": ("producer", {"queues": ["bench-*"]}),
}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3000, help="pushes per token")
    args = parser.parse_args()
    secrets = {name: f"{name}-bench-token-{uuid.uuid4().hex}" for name in TOKENS}
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    port = free_port()
    entries = [
        {"name": name, "role": role, "token": secrets[name], **scope}
        for name, (role, scope) in TOKENS.items()
    ]
    with EmbeddedServer() as valkey, tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "fairque.yaml"
        config.write_text(json.dumps({"server": {"port": port, "tokens": entries}}))
        service = start_service(valkey.url, port, config=str(config))
        samples: dict[str, list[float]] = {name: [] for name in (*TOKENS, "tenant_with_id")}
        try:
            clients = {
                name: httpx.Client(
                    base_url=f"http://127.0.0.1:{port}/v1/queues/{queue}",
                    headers={"Authorization": f"Bearer {secrets[name]}"},
                )
                for name in TOKENS
            }
            clients["tenant_with_id"] = clients["tenant"]
            for i in range(args.rounds + 100):  # the first 100 rounds warm up
                for name, client in clients.items():
                    body: dict[str, Any] = {"name": "job", "user_id": "acme", "payload": {"i": i}}
                    if name == "tenant_with_id":
                        body["task_id"] = f"order-{i}"
                    started = time.perf_counter()
                    answer = client.post("/tasks", json=body)
                    elapsed = time.perf_counter() - started
                    assert answer.status_code == 201, answer.text
                    if i >= 100:
                        samples[name].append(elapsed * 1e6)
        finally:
            service.terminate()
            service.wait(timeout=15)
    base = statistics.median(samples["whole"])
    report = {
        "benchmark": "scoped_push",
        "settings": vars(args),
        "machine": machine(),
        "results": {
            name: {
                "p50_us": round(statistics.median(values)),
                "p99_us": round(percentile(values, 0.99)),
                "p50_ratio_to_whole": round(statistics.median(values) / base, 3),
            }
            for name, values in samples.items()
        },
        "note": "one push per request, one request at a time, the tokens taken in turn",
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
