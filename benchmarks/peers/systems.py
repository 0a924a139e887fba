"""The benchmarked systems: where each runs and how its one worker process is started.

Every worker runs the task module ``adapters/peer_<adapter>.py``. Three worker settings:

* ``default``: the library's defaults, except that the process count is pinned to one where
  the library would start one process per CPU (Dramatiq ``--processes 1``, Celery's prefork
  pool ``--concurrency 1``, taskiq ``--workers 1``);
* ``tuned``: the same one process with the concurrency raised to ``concurrency``, and its
  per-task log lines turned off where the system writes any at its default level (the
  first thing an operator turns down for throughput): taskiq and RQ with their
  log-level option, Huey with ``--quiet``, arq and streaq with their own default logging
  configuration at WARNING (``QUIET`` in their adapters); fairque's log level is set to
  WARNING as well (it drops its periodic summary line). Celery runs at WARNING in every
  setting; fairque, Dramatiq and SAQ write no line per task by default;
* ``noisy``: the same one process at the noisy-neighbour concurrency (equal for all).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ADAPTERS = HERE / "adapters"
VENVS = HERE / ".venvs"

#: A worker setting: "default", "tuned" or "noisy".
Setting = str


@dataclass(frozen=True)
class WorkerSpec:
    """The command line of a worker process and what it means."""

    argv: list[str]
    env: dict[str, str]
    concurrency: str


@dataclass(frozen=True)
class System:
    """One benchmarked system.

    Attributes:
        name: the name shown in the results.
        adapter: ``adapters/peer_<adapter>.py``.
        worker: builds the worker command for (bin dir, url, setting, concurrency).
        venv_requirements: when set, the system runs in its own virtual environment
            ``.venvs/<adapter>`` with these requirements, and ``venv_reason`` says why.
    """

    name: str
    adapter: str
    worker: Callable[[Path, str, Setting, int], WorkerSpec]
    venv_requirements: tuple[str, ...] = ()
    venv_reason: str = ""
    has_concurrency: bool = True
    notes: list[str] = field(default_factory=list)

    @property
    def venv(self) -> Path | None:
        return VENVS / self.adapter if self.venv_requirements else None

    @property
    def bin_dir(self) -> Path:
        venv = self.venv
        return venv / "bin" if venv is not None else Path(sys.executable).parent

    @property
    def python(self) -> Path:
        return self.bin_dir / "python"


def _conc(c: int) -> dict[str, str]:
    return {"BENCH_CONCURRENCY": str(c)}


def rq_worker(bin_dir: Path, url: str, setting: Setting, c: int) -> WorkerSpec:
    argv = [str(bin_dir / "rq"), "worker", "--url", url, "--path", str(ADAPTERS)]
    if setting == "default":
        return WorkerSpec([*argv, "bench"], {}, "rq.Worker (forks per job), 1 job at a time")
    quiet = ["--logging_level", "WARNING"] if setting == "tuned" else []
    return WorkerSpec(
        [*argv, *quiet, "--worker-class", "rq.worker.SimpleWorker", "bench"],
        {},
        "rq.SimpleWorker (no fork), 1 job at a time: RQ has no in-process concurrency"
        + (", --logging_level WARNING" if quiet else ""),
    )


def arq_worker(bin_dir: Path, url: str, setting: Setting, c: int) -> WorkerSpec:
    argv = [str(bin_dir / "arq"), "peer_arq.WorkerSettings"]
    if setting == "default":
        return WorkerSpec(argv, {}, "max_jobs=10 (default)")
    if setting == "tuned":
        argv = [*argv, "--custom-log-dict", "peer_arq.QUIET"]
    quiet = ", log level WARNING" if setting == "tuned" else ""
    return WorkerSpec(argv, _conc(c), f"max_jobs={c}{quiet}")


def saq_worker(bin_dir: Path, url: str, setting: Setting, c: int) -> WorkerSpec:
    argv = [str(bin_dir / "saq"), "peer_saq.settings", "--workers", "1"]
    if setting == "default":
        return WorkerSpec(argv, {}, "concurrency=10 (default)")
    return WorkerSpec(argv, _conc(c), f"concurrency={c}")


def dramatiq_worker(bin_dir: Path, url: str, setting: Setting, c: int) -> WorkerSpec:
    argv = [str(bin_dir / "dramatiq"), "peer_dramatiq", "--processes", "1"]
    if setting == "default":
        return WorkerSpec(argv, {}, "--processes 1, 8 threads (default)")
    return WorkerSpec([*argv, "--threads", str(c)], {}, f"--processes 1 --threads {c}")


def huey_worker(bin_dir: Path, url: str, setting: Setting, c: int) -> WorkerSpec:
    argv = [str(bin_dir / "huey_consumer"), "peer_huey.huey"]
    if setting == "default":
        return WorkerSpec(argv, {}, "1 worker thread (default)")
    quiet = ["--quiet"] if setting == "tuned" else []
    return WorkerSpec(
        [*argv, *quiet, "--workers", str(c), "--worker-type", "thread"],
        {},
        f"-w {c} -k thread" + (" --quiet" if quiet else ""),
    )


def celery_worker(bin_dir: Path, url: str, setting: Setting, c: int) -> WorkerSpec:
    argv = [str(bin_dir / "celery"), "-A", "peer_celery", "worker", "--loglevel", "WARNING"]
    if setting == "default":
        return WorkerSpec(
            [*argv, "--concurrency", "1"], {}, "prefork pool (default), --concurrency 1"
        )
    return WorkerSpec(
        [*argv, "--pool", "threads", "--concurrency", str(c)],
        {},
        f"--pool threads --concurrency {c}",
    )


def taskiq_worker(bin_dir: Path, url: str, setting: Setting, c: int) -> WorkerSpec:
    argv = [str(bin_dir / "taskiq"), "worker", "peer_taskiq:broker", "--workers", "1"]
    if setting == "default":
        return WorkerSpec(argv, {}, "--workers 1, max-async-tasks 100 (default)")
    quiet = ["--log-level", "WARNING"] if setting == "tuned" else []
    return WorkerSpec(
        [*argv, *quiet, "--max-async-tasks", str(c)],
        {},
        f"--workers 1 --max-async-tasks {c}" + (" --log-level WARNING" if quiet else ""),
    )


def streaq_worker(bin_dir: Path, url: str, setting: Setting, c: int) -> WorkerSpec:
    argv = [str(bin_dir / "streaq"), "run", "peer_streaq:worker"]
    if setting == "default":
        return WorkerSpec(argv, {}, "concurrency=16 (default)")
    quiet = {"BENCH_QUIET": "1"} if setting == "tuned" else {}
    about = ", log level WARNING" if quiet else ""
    return WorkerSpec(argv, {**_conc(c), **quiet}, f"concurrency={c}{about}")


def fairque_worker(bin_dir: Path, url: str, setting: Setting, c: int) -> WorkerSpec:
    argv = [
        str(bin_dir / "python"), "-m", "fairque", "--url", url, "--queue", "bench",
        "worker", "--import", "peer_fairque",
    ]  # fmt: skip
    if setting == "default":
        return WorkerSpec(argv, {}, "--concurrency 10 (default)")
    quiet = ["--log-level", "WARNING"] if setting == "tuned" else []
    return WorkerSpec(
        [*argv, *quiet, "--concurrency", str(c)], {}, f"--concurrency {c} {' '.join(quiet)}".strip()
    )


SYSTEMS: dict[str, System] = {
    s.adapter: s
    for s in [
        System("fairque", "fairque", fairque_worker),
        System("RQ", "rq", rq_worker, has_concurrency=False),
        System(
            "arq",
            "arq",
            arq_worker,
            venv_requirements=("arq>=0.26",),
            venv_reason="arq>=0.26 requires redis<6; the project resolves redis 8",
        ),
        System("SAQ", "saq", saq_worker),
        System("Dramatiq", "dramatiq", dramatiq_worker),
        System("Huey", "huey", huey_worker),
        System("Celery", "celery", celery_worker),
        System("taskiq", "taskiq", taskiq_worker),
        System("streaq", "streaq", streaq_worker),
    ]
}
