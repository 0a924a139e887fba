"""Run every benchmark with one command and write the report to ``docs/benchmarks/``.

Runs ``benchmarks/engine.py`` (the core engine: push/pop/complete throughput and pop
latency) and ``benchmarks/peers/run.py`` (fairque against RQ, arq, SAQ, Dramatiq, Huey,
Celery, taskiq and streaq), each as a subprocess, then writes:

* ``results.json``: both benchmarks' JSON documents;
* ``results.md``: the machine, the method and the figures as Markdown tables;
* ``throughput.png``, ``latency.png``, ``noisy_neighbour.png``: charts.

Usage::

    uv run --group peers python benchmarks/run_all.py [--quick] [--systems fairque,rq]
        [--phases default,tuned] [--skip-engine] [--out /tmp/bench]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_OUT = ROOT / "docs" / "benchmarks"


def log(message: str) -> None:
    print(f"[run_all {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------- running
def run_engine(quick: bool, timeout: float) -> dict[str, Any]:
    """The engine benchmark's JSON, or a note saying why there is none."""
    command = [sys.executable, str(HERE / "engine.py"), *(["--quick"] if quick else [])]
    log("engine benchmark: " + " ".join(command[1:]))
    try:
        done = subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"failed": f"timed out after {timeout:.0f} s"}
    if done.returncode != 0:
        return {"failed": f"exit code {done.returncode}"}
    try:
        result: dict[str, Any] = json.loads(done.stdout)
    except json.JSONDecodeError as exc:
        return {"failed": f"output is not JSON: {exc}"}
    return result


def run_peers(
    quick: bool, systems: str | None, timeout: float, phases: str | None = None
) -> dict[str, Any]:
    """The peers benchmark's JSON, or a note saying why there is none."""
    with tempfile.TemporaryDirectory(prefix="fairque-peers-") as tmp:
        out = Path(tmp) / "peers.json"
        command = [sys.executable, str(HERE / "peers" / "run.py"), "--out", str(out)]
        command += ["--quick"] if quick else []
        command += ["--systems", systems] if systems else []
        command += ["--phases", phases] if phases else []
        log("peers benchmark: " + " ".join(command[1:]))
        try:
            done = subprocess.run(command, cwd=ROOT, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"failed": f"timed out after {timeout:.0f} s"}
        if done.returncode != 0 or not out.exists():
            return {"failed": f"exit code {done.returncode}"}
        result: dict[str, Any] = json.loads(out.read_text())
        return result


# ---------------------------------------------------------------------- Markdown
def fmt(value: Any, unit: str = "") -> str:
    """A table cell: thousands separators, or a dash for a missing (unverified) figure."""
    if value is None:
        return "-"
    if isinstance(value, float) and not value.is_integer():
        text = f"{value:,.3f}".rstrip("0").rstrip(".") if value < 10 else f"{value:,.1f}"
    else:
        text = f"{int(value):,}"
    return text + unit


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def version_of(system: dict[str, Any]) -> str:
    versions = {k: v for k, v in system.get("versions", {}).items() if k != "redis"}
    return ", ".join(f"{v}" for v in versions.values()) or "?"


def handler_share(peers: dict[str, Any], systems: list[dict[str, Any]]) -> list[str]:
    """The sentence under the table: the handler-alone ceiling and each system's share."""
    alone = peers.get("handler_alone", {})
    if "failed" in alone:
        return ["", f"The handler-alone ceiling could not be measured: {alone['failed']}."]
    if not alone.get("per_s"):
        return []
    shares = ", ".join(
        f"{s['system']} {100 * s['figures']['process_real_per_s'] / alone['per_s']:.0f} %"
        for s in systems
        if s.get("figures", {}).get("process_real_per_s")
    )
    return [
        "",
        "The *ceiling* row runs the same handler body (one `INCR` round trip and the count) "
        f"with no queue, {alone['concurrency']} at a time in one process "
        "(`benchmarks/peers/handler_alone.py`), in the same run: no worker process at that "
        "concurrency can pass it. Each system's share of it (one Redis call per task, "
        f"defaults): {shares}.",
    ]


def peers_markdown(peers: dict[str, Any]) -> list[str]:
    if "failed" in peers:
        return [f"The peers benchmark failed: {peers['failed']}."]
    p = peers["parameters"]
    systems: list[dict[str, Any]] = peers["systems"]
    lines = [
        f"Server: {peers['server']['kind']} {peers['server']['version']} (private, "
        f"started by the benchmark). Mode: **{peers['mode']}**; "
        f"{fmt(p['tasks'])} tasks per throughput phase, {fmt(p['latency_samples'])} latency "
        f"samples, flood {fmt(p['flood'])} + {p['tenants']} tenants x {p['per_tenant']} "
        f"tasks of {p['work_ms']:g} ms; fairness windows of {p['window_s']:g} s. "
        f"Run time {fmt(peers['total_seconds'])} s.",
        "",
        "### Throughput and idle latency",
        "",
    ]
    rows = []
    for s in systems:
        f = s.get("figures", {})
        rows.append(
            [
                f"**{s['system']}**",
                version_of(s),
                fmt(f.get("enqueue_single_per_s")),
                fmt(f.get("enqueue_bulk_per_s")) if s.get("bulk_api") else "no bulk API",
                fmt(f.get("process_default_per_s")),
                fmt(f.get("process_real_per_s")),
                fmt(f.get("process_tuned_per_s")),
                fmt(f.get("latency_p50_ms")),
                fmt(f.get("latency_p99_ms")),
                fmt(f.get("memory_per_task_bytes")),
            ]
        )
    alone = peers.get("handler_alone", {}).get("per_s")
    if alone:
        rows.append(["*ceiling: the handler alone, no queue*", "-", "-", "-", "-", fmt(alone),
                     "-", "-", "-", "-"])  # fmt: skip
    low = peers.get("floor", {})
    floors = [("LPUSH to a process in BLPOP", "handoff_ms"), ("idle client's PING", "ping_ms")]
    for label, key in floors:
        if key in low:
            rows.append(
                [f"*machine floor: {label}*", "-", "-", "-", "-", "-", "-",
                 fmt(low[key]["p50"]), fmt(low[key]["p99"]), "-"]
            )  # fmt: skip
    lines += table(
        [
            "system",
            "version",
            "enqueue 1/call (tasks/s)",
            "enqueue bulk (tasks/s)",
            "process, defaults (tasks/s)",
            "one Redis call per task, defaults (tasks/s)",
            "process, tuned (tasks/s)",
            "idle latency p50 (ms)",
            "p99 (ms)",
            "memory per queued task (bytes)",
        ],
        rows,
    )
    if "handoff_ms" in low:
        lines += [
            "",
            "The *machine floor* rows are measured in the same run the same way as the idle "
            "latency (`benchmarks/peers/floor.py`): a bare `LPUSH` to a second process "
            "blocked in `BLPOP`, and an idle client's `PING` round trip. No Redis-based "
            "queue picks up faster here.",
        ]
    elif "failed" in low:
        lines += ["", f"The machine floor could not be measured: {low['failed']}."]
    lines += handler_share(peers, systems)
    lines += [
        "",
        "Throughput figures are one rate per run (first to last completion), not per-task "
        "samples, so they have no percentiles; `results.json` has every tuned setting's rate "
        "(`tuned_sweep_per_s`).",
    ]
    lines += ["", *server_time_markdown(systems)]
    lines += ["", "Worker settings (one worker process each):", ""]
    rows = [
        [
            s["system"],
            s.get("workers", {}).get("default", "-"),
            s.get("workers", {}).get("tuned", "-"),
        ]
        for s in systems
    ]
    lines += table(["system", "defaults", "tuned (best of the sweep)"], rows)
    if "noisy" not in peers.get("phases", ["noisy"]):
        lines += ["", "### Noisy neighbour", "", "Not run (`--phases`)."]
        return lines + failures_markdown(systems)
    lines += [
        "",
        f"### Noisy neighbour ({fmt(p['flood'])}-task backlog, then {p['tenants']} small "
        f"tenants x {p['per_tenant']} tasks, concurrency {p['noisy_concurrency']})",
        "",
    ]
    rows = []
    for s in systems:
        f = s.get("figures", {})
        n = s.get("details", {}).get("noisy", {})
        rows.append(
            [
                f"**{s['system']}**",
                fmt(f.get("small_p50_s")),
                fmt(f.get("small_p99_s")),
                fmt(f.get("small_max_s")),
                fmt(f.get("jain_mean")),
                fmt(f.get("jain_norm_mean")),
                fmt(n.get("windows")),
                fmt(n.get("throughput_per_s")),
                s.get("workers", {}).get("noisy", "-"),
            ]
        )
    lines += table(
        [
            "system",
            "small tenants p50 (s)",
            "p99 (s)",
            "max (s)",
            "Jain (mean)",
            "J_norm (mean)",
            "windows",
            "tasks/s",
            "worker",
        ],
        rows,
    )
    return lines + failures_markdown(systems)


def failures_markdown(systems: Sequence[dict[str, Any]]) -> list[str]:
    failures = [(s["system"], k, v) for s in systems for k, v in s.get("failures", {}).items()]
    lines = ["", "### Failed or unverified figures", ""]
    if failures:
        lines += [f"- **{name}**, {phase}: {reason}" for name, phase, reason in failures]
    else:
        lines.append("None: every figure above was verified by the task counter.")
    lines += ["", "### Environments", ""]
    lines += [f"- **{s['system']}**: {s.get('environment', '?')}" for s in systems]
    return lines


SERVER_MODES = (
    ("one_at_a_time", "one at a time"),
    ("batched", "batched (bulk)"),
    ("tuned", "tuned (no bulk API)"),
)


def server_time_markdown(systems: Sequence[dict[str, Any]]) -> list[str]:
    """The table of the Redis server's time per task (``servertime.py``)."""
    rows = []
    for s in systems:
        server = s.get("server_time", {})
        for key, label in SERVER_MODES:
            mode = server.get(key)
            if not mode:
                continue
            life = mode["life"]
            scripts, other = life["scripts_us"], life["other_us"]
            top = (
                fmt(other) if not scripts else f"{fmt(max(scripts, other))}-{fmt(scripts + other)}"
            )
            rows.append(
                [
                    f"**{s['system']}**",
                    label,
                    fmt(mode["enqueue"]["cpu_us"]),
                    fmt(mode["process"]["cpu_us"]),
                    fmt(life["cpu_us"]),
                    fmt(scripts),
                    fmt(other),
                    top,
                ]
            )
    if not rows:
        return []
    lines = [
        "### Redis server time per task (µs)",
        "",
        "A task's full life = its enqueue + its processing (push + lease + complete). "
        "**CPU** is the server's main-thread CPU time (`INFO cpu`), which includes reading "
        "requests and writing replies; **commandstats** is the time spent inside commands "
        "(`INFO commandstats` usec). A command called from a Lua script is counted both under "
        "its own name and in the script's time, so scripts (`EVALSHA` and co., inner calls "
        "included) and other commands (inner calls included) are shown apart; the time in "
        "top-level commands lies in the last column's range (exact for a system without "
        "scripts). *One at a time*: enqueue one per call, worker at defaults; *batched*: "
        "bulk enqueue, best tuned worker. Commandstats usec is wall time inside the command: "
        "on a loaded machine it can exceed the CPU figure, which is the steadier of the two.",
        "",
    ]
    lines += table(
        [
            "system",
            "mode",
            "enqueue CPU",
            "processing CPU",
            "full life CPU",
            "full life: scripts",
            "other commands",
            "top-level commands",
        ],
        rows,
    )
    return lines


def engine_markdown(engine: dict[str, Any]) -> list[str]:
    if "failed" in engine:
        return [f"The engine benchmark failed: {engine['failed']}."]
    lines: list[str] = []
    for run in engine.get("runs", []):
        srv = run.get("server", {})
        lines += [f"Server: {srv.get('kind', '?')} {srv.get('version', '?')}.", ""]
        rows = [
            [t["name"], fmt(t["tasks"]), fmt(round(t["tasks_per_s"])), fmt(t.get("round_trips"))]
            for t in run.get("throughput", [])
        ]
        lines += table(["operation", "tasks", "tasks/s", "round trips"], rows)
        lines.append("")
        rows = []
        for key, case in run.get("pop_latency", {}).items():
            pop = case.get("pop_latency", {})
            side = case.get("server_side", {})
            rows.append(
                [
                    key, fmt(case.get("users")), fmt(case.get("queued")), fmt(pop.get("p50_us")),
                    fmt(pop.get("p99_us")), fmt(side.get("script_us_per_pop")),
                    fmt(side.get("server_cpu_us_per_pop")),
                ]
            )  # fmt: skip
        lines += table(
            [
                "pop latency case", "users", "queued", "p50 (µs)", "p99 (µs)",
                "server script (µs/pop)", "server CPU (µs/pop)",
            ],
            rows,
        )  # fmt: skip
        lines.append("")
    for skipped in engine.get("skipped", []):
        lines.append(f"- skipped: {skipped}")
    return lines


METHOD = """\
### Method

- One private Valkey on a free local port; the database is flushed between phases.
- Each system runs **one worker process** started with its own command (`rq worker`, `arq`,
  `saq`, `dramatiq`, `huey_consumer`, `celery worker`, `taskiq worker`, `streaq run`,
  `python -m fairque worker`), and a producer process (`benchmarks/peers/agent.py`) in the
  same Python environment. Task modules: `benchmarks/peers/adapters/peer_*.py`.
- **Defaults** are the library's, except that the process count is pinned to one where
  the library starts one per CPU (Dramatiq `--processes 1`, Celery's prefork pool
  `--concurrency 1`, taskiq `--workers 1`). **Tuned** raises the concurrency (the driver
  tries 8, 32 and 128 and reports the best; RQ has no in-process concurrency: its tuned
  worker is `SimpleWorker`, which does not fork per job) and turns off the per-task log
  lines of every system that writes them at its default level: RQ and taskiq with their
  log-level option at WARNING, Huey with `--quiet`, arq and streaq with their own logging
  configuration at WARNING (fairque's level is WARNING too). Celery runs at WARNING in
  both settings; fairque (a summary line every 10 s), Dramatiq and SAQ write no line per
  task by default. Defaults keep each library's logging.
- **Enqueue**: tasks enqueued with the worker stopped, one per call, and with the bulk API
  (batches of 1,000) where the library has one. fairque's tasks are spread over 10 users.
  **Memory per queued task**: the server's `used_memory` after the one-per-call enqueue
  less before it, over the tasks enqueued (the same near-empty payload for every system).
- **Processing**: the worker drains the preloaded queue; timed from its first completion
  to its last (startup excluded). Throughput tasks are near no-ops: each execution is
  counted in the worker process's memory and a daemon thread writes the counts every 5 ms
  with one pipeline (`INCRBY bench:count`, `RPUSH bench:ids` with the job ids, which name
  duplicates, `GET bench:expect`); every process writes its first task at once and buffers
  only later ones, so RQ's work horse (one task, then `os._exit`) loses nothing. The same
  code runs in every system (`adapters/benchcommon.py`). The driver waits in `BLPOP` for the
  marker the write that reaches the expected count pushes, so it adds no traffic.
- **One Redis call per task**: the same drain with the default worker, but each task
  makes one Redis round trip first (`INCR bench:real`, through the worker's own kind of
  client: asyncio for asyncio systems), as most real tasks read or write one key.
- **Server time per task**: `INFO cpu` (main thread) and `INFO commandstats` read around
  the enqueue and over the processing window, less what the idle server spends per second
  (measured before each system). The processing window includes the count writes above.
- **Idle latency**: with the worker idle, the producer enqueues one task and waits until its
  handler starts (time from the start of the enqueue call to the handler's first line,
  `time.time()` on both sides), 20 ms apart.
- **Noisy neighbour**: one tenant's backlog is enqueued with the worker stopped; the worker
  starts; right after its first completion the small tenants submit their tasks (10 each,
  one per call). Tasks sleep 1 ms. Peers have no tenants: all tasks share one queue (what
  their users do today); fairque passes `user_id`. Completion time = handler end - submit.
  Jain's index is computed per window (one second; 0.25 s in quick runs, whose backlog
  drains in about a second) from the first small submission to the
  last small completion over the tenants with pending demand; **J_norm** divides each
  tenant's completions by its max-min fair share of the window's capacity given its
  demand (DESIGN §9) — 1.0 means every tenant got its fair share.
- **Verification**: every task is counted in `bench:count` (latency and noisy tasks at
  once, with their timestamps); a figure is reported only when the counter equals the
  number of tasks enqueued (checked again 0.3 s later to catch duplicates, which the
  recorded job ids name). Unverified figures are listed below and shown as "-".
  SAQ's duplicates are SAQ's own: at start its worker sweeps jobs that are in its active
  list but not yet marked active, and runs them again (its log says "Sweeping job" at
  INFO, which `saq --verbose` shows).
"""


def markdown(report: dict[str, Any]) -> str:
    peers, engine = report["peers"], report["engine"]
    machine = peers.get("machine") or {}
    emach = engine.get("machine") or {}
    lines = [
        "# Benchmarks",
        "",
        f"Generated {report['generated_at']} by `{report['command']}`.",
        "",
        "## Machine",
        "",
        f"- CPU: {machine.get('cpu') or emach.get('cpu_model', '?')}, "
        f"{machine.get('cpus') or emach.get('cpu_count', '?')} cores; "
        f"memory {machine.get('memory_gib', '?')} GiB",
        f"- {machine.get('platform') or emach.get('platform', '?')}, "
        f"Python {machine.get('python') or emach.get('python', '?')}",
        "- Load average (1 min) around each system's run is in `results.json` "
        "(`loadavg_1m`): other processes on the machine skew the figures.",
        "",
        "## fairque and its peers",
        "",
        *peers_markdown(peers),
        "",
        METHOD,
        "## Core engine (`benchmarks/engine.py`)",
        "",
        *engine_markdown(engine),
        "",
        "Charts: `throughput.png`, `latency.png`, `noisy_neighbour.png`.",
        "",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------------- charts
def charts(peers: dict[str, Any], out_dir: Path) -> list[Path]:
    """Write the PNG charts; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    systems = peers.get("systems", [])
    if not systems:
        return []
    names = [s["system"] for s in systems]
    figs = [s.get("figures", {}) for s in systems]
    colors = ["#d62728" if n == "fairque" else "#1f77b4" for n in names]
    written = []

    def values(key: str) -> list[float]:
        return [float(f.get(key) or 0) for f in figs]

    def save(fig: Any, name: str) -> None:
        path = out_dir / name
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    series = [
        ("enqueue 1/call", "enqueue_single_per_s"),
        ("enqueue bulk", "enqueue_bulk_per_s"),
        ("process, defaults", "process_default_per_s"),
        ("one Redis call per task", "process_real_per_s"),
        ("process, tuned", "process_tuned_per_s"),
    ]
    fig, axes = plt.subplots(1, len(series), figsize=(19, 4.5), sharey=False)
    for ax, (title, key) in zip(axes, series, strict=True):
        ax.barh(names, values(key), color=colors)
        ax.set_title(title)
        ax.set_xlabel("tasks/s")
        ax.invert_yaxis()
        for i, v in enumerate(values(key)):
            ax.text(v, i, f" {v:,.0f}" if v else " -", va="center", fontsize=8)
    fig.suptitle(f"Throughput, one worker process ({peers['mode']} run; - = none or unverified)")
    save(fig, "throughput.png")

    fig, ax = plt.subplots(figsize=(9, 4.5))
    x = range(len(names))
    p50, p99 = values("latency_p50_ms"), values("latency_p99_ms")
    ax.bar([i - 0.2 for i in x], p50, width=0.4, label="p50", color="#1f77b4")
    ax.bar([i + 0.2 for i in x], p99, width=0.4, label="p99", color="#ff7f0e")
    ax.set_xticks(list(x), names, rotation=30)
    ax.set_yscale("log")
    ax.set_ylabel("ms (log scale)")
    ax.set_title("Idle pick-up latency: enqueue to handler start")
    ax.legend()
    save(fig, "latency.png")

    fig, ax = plt.subplots(figsize=(9, 4.5))
    p99s = values("small_p99_s")
    ax.bar(names, p99s, color=colors)
    ax.set_yscale("log")
    ax.set_ylabel("seconds (log scale)")
    params = peers["parameters"]
    ax.set_title(
        f"Noisy neighbour: small tenants' p99 completion time\n"
        f"({params['flood']:,}-task backlog, {params['tenants']} tenants x "
        f"{params['per_tenant']} tasks, concurrency {params['noisy_concurrency']})"
    )
    for i, (v, f) in enumerate(zip(p99s, figs, strict=True)):
        jn = f.get("jain_norm_mean")
        label = f"{v:.2f}s" if v else "-"
        if jn is not None:
            label += f"\nJ_norm {jn:.2f}"
        ax.text(i, v, label, ha="center", va="bottom", fontsize=8)
    ax.tick_params(axis="x", rotation=30)
    top = max(p99s, default=1.0)
    ax.set_ylim(top=top * 4 if top > 0 else 1.0)
    save(fig, "noisy_neighbour.png")
    return written


# ---------------------------------------------------------------------- main
def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a few minutes)")
    parser.add_argument("--systems", help="peers to run, comma-separated (default: all)")
    parser.add_argument(
        "--phases", help="peers phases to run, comma-separated: default,tuned,noisy (all)"
    )
    parser.add_argument("--skip-engine", action="store_true", help="do not run engine.py")
    parser.add_argument(
        "--out", "--out-dir", dest="out_dir", type=Path, default=DEFAULT_OUT,
        help=f"where to write the report (default: {DEFAULT_OUT.relative_to(ROOT)})",
    )  # fmt: skip
    return parser.parse_args(argv)


# ---------------------------------------------------------------------- README
README = ROOT / "README.md"
README_START, README_END = "<!-- benchmark table: start -->", "<!-- benchmark table: end -->"


def readme_table(peers: dict[str, Any]) -> list[str]:
    """The README's summary table: every system, fairque first, then by tuned rate."""

    def life(s: dict[str, Any], mode: str) -> str:
        return fmt(round(s.get("server_time", {}).get(mode, {}).get("life", {}).get("cpu_us", 0)))

    systems = sorted(
        peers["systems"],
        key=lambda s: (
            s["system"] != "fairque",
            -(s.get("figures", {}).get("process_tuned_per_s") or 0),
        ),
    )
    rows = []
    for s in systems:
        f = s.get("figures", {})
        batched = "batched" if "batched" in s.get("server_time", {}) else "tuned"
        p99 = f.get("small_p99_s")
        rows.append([
            f"{s['system']} {version_of(s)}",
            fmt(f.get("enqueue_single_per_s")),
            fmt(f.get("enqueue_bulk_per_s")) if s.get("bulk_api") else "-",
            f"{fmt(f.get('process_tuned_per_s'))} "
            f"({fmt(f.get('process_default_per_s'))} with defaults)",
            fmt(f.get("process_real_per_s")),
            f"{fmt(f.get('latency_p50_ms'))} / {fmt(f.get('latency_p99_ms'))}",
            f"{life(s, 'one_at_a_time')} / {life(s, batched)}",
            fmt(f.get("memory_per_task_bytes")),
            "-" if p99 is None else f"{p99:.3g} s",
        ])  # fmt: skip
    alone = peers.get("handler_alone", {}).get("per_s")
    if alone:
        rows.append(["*ceiling: the handler alone, no queue*", "-", "-", "-", fmt(alone), "-",
                     "-", "-", "-"])  # fmt: skip
    low = peers.get("floor", {}).get("handoff_ms")
    if low:
        rows.append(["*floor: LPUSH to a process in BLPOP*", "-", "-", "-", "-",
                     f"{fmt(low['p50'])} / {fmt(low['p99'])}", "-", "-", "-"])  # fmt: skip
    return table(
        [
            "system", "enqueue 1/call (tasks/s)", "bulk", "process, tuned (tasks/s)",
            "one Redis call per task, defaults (tasks/s)", "idle pick-up p50 / p99 (ms)",
            "server CPU per task, full life: one at a time / batched (µs)",
            "memory per queued task (bytes)", "small tenants' p99 under a 20,000-task flood",
        ],
        rows,
    )  # fmt: skip


def update_readme(peers: dict[str, Any]) -> bool:
    """Replace the table between the README's markers; False when they are missing."""
    text = README.read_text()
    start, end = text.find(README_START), text.find(README_END)
    if start < 0 or end < start:
        return False
    body = "\n".join([README_START, *readme_table(peers), README_END])
    README.write_text(text[:start] + body + text[end + len(README_END) :])
    return True


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    shown = ["benchmarks/run_all.py", *(argv if argv is not None else sys.argv[1:])]
    report: dict[str, Any] = {
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(["uv run --group peers python", *shown]),
        "mode": "quick" if args.quick else "full",
    }
    if args.skip_engine:
        report["engine"] = {"failed": "skipped (--skip-engine)"}
    else:
        report["engine"] = run_engine(args.quick, 900 if args.quick else 7200)
    report["peers"] = run_peers(
        args.quick, args.systems, 1800 if args.quick else 4 * 3600, args.phases
    )
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "results.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out_dir / "results.md").write_text(markdown(report))
    written = charts(report["peers"], args.out_dir) if "failed" not in report["peers"] else []
    for path in [args.out_dir / "results.json", args.out_dir / "results.md", *written]:
        log(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    full = not args.quick and not args.systems and args.out_dir == DEFAULT_OUT
    if full and "failed" not in report["peers"]:
        if update_readme(report["peers"]):
            log("wrote the table of README.md")
        else:
            log(f"README.md has no {README_START} ... {README_END}: table not written")
    failed = "failed" in report["peers"] or (not args.skip_engine and "failed" in report["engine"])
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
