"""The ceiling of the ``real`` phase: its handler body with no queue at all.

``python handler_alone.py URL N C`` runs the ``real`` task body (``run_task_async``: one
``INCR`` round trip and the recorder's count, exactly what every system's handler runs)
``N`` times in this one process, at most ``C`` at a time on one asyncio loop, and prints
JSON: ``per_s``, the rate. A queue's worker process, at the same concurrency, can only
come below it: the difference is what the worker spends per task outside the handler
(its share of the process is ``system rate / per_s``).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "adapters"))

from benchcommon import MODE_REAL, run_task_async


async def drain(n: int, concurrency: int) -> float:
    """Run ``n`` handler bodies, ``concurrency`` at a time; the rate per second."""
    ids = iter(range(n))

    async def lane() -> None:
        for i in ids:
            await run_task_async(f"alone-{i}", MODE_REAL, 0.0)

    await run_task_async("alone-warm", MODE_REAL, 0.0)  # the client's connection
    started = time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(concurrency)))
    return n / (time.perf_counter() - started)


def main(n: int, concurrency: int) -> dict[str, float]:
    return {
        "tasks": n,
        "concurrency": concurrency,
        "per_s": round(asyncio.run(drain(n, concurrency))),
    }


if __name__ == "__main__":
    import os

    os.environ["BENCH_URL"] = sys.argv[1]
    print(json.dumps(main(int(sys.argv[2]), int(sys.argv[3]))))
