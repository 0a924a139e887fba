"""Chaos: worker SIGKILLs, server restarts with AOF, connection cuts and stalls.

Each scenario runs real ``fairque worker`` processes against a real server while
a producer pushes a few thousand tasks for 20 users, injects its faults, stops
them, keeps pushing for a few seconds (every surviving worker must take part
again without help), then checks the promise: every task FINISHED, exactly one
accepted completion each (the queue's ``completed`` counter equals the number of
tasks), no in-flight count left behind. Executions may repeat (at-least-once):
they are counted, not forbidden. Each scenario prints a ``faults: ...`` line;
the session prints them all at the end.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest
from helpers.servers import ServerInfo
from helpers.support import unique_queue

from fairque import FairQueue
from fairque.cli.embedded import EmbeddedServer, find_valkey_server, free_port
from faults.chaos import (
    Fleet,
    Producer,
    Records,
    assert_recovered,
    assert_sound,
    resilient_client,
    start_fleet,
    tally,
    until,
    wait_drained,
    wait_recovered,
)
from faults.proxy import FaultProxy

pytestmark = [pytest.mark.faults, pytest.mark.timeout(180)]

WORKERS = 4
KILL_WORKERS = 10  # a replacement may need seconds to start on a small, busy machine
KILLS = 12
DRAIN_SECONDS = 30.0
RECOVERY_SECONDS = 30.0


def registered(q: FairQueue) -> int:
    return len(q.workers())


def test_worker_sigkill_chaos(server: ServerInfo, tmp_path: Path) -> None:
    """12 SIGKILLs of random busy workers, a new worker started after each.

    The replacements are new processes: that no worker exits by itself is checked
    here, recovering without help is the other scenarios' business.
    """
    queue = unique_queue("chaos-kill")
    q = FairQueue.from_url(server.url, queue, retry_base_seconds=0)
    fleet = Fleet(
        server.url, queue, tmp_path, cluster=server.cluster,
        env={"FAIRQUE_WORKER__LEASE_SECONDS": "1"},
    )  # fmt: skip
    # 375 tasks a second until the kills are done (a busy machine starts replacements
    # slowly, so kills come slower): 12,000 at most
    producer = Producer(q, batch=150, limit=80, seed=1)
    try:
        start_fleet(fleet, KILL_WORKERS, lambda: registered(q))
        producer.start()
        rng = random.Random(7)
        kills = 0
        deadline = time.monotonic() + 60
        while kills < KILLS and producer.pushing and time.monotonic() < deadline:
            time.sleep(rng.uniform(0.5, 0.8))
            if fleet.kill_random(rng) is not None:  # only workers that have run tasks
                fleet.spawn()
                if producer.pushing:  # a kill after the last push would prove less
                    kills += 1
        time.sleep(1.0)  # the last victims' leases expire while tasks still arrive
        producer.finish()
        wait_drained(q, len(producer.ids), DRAIN_SECONDS)
        fleet.stop()
        rec = Records.read(fleet.record_dir)
        t = tally(
            f"worker-sigkill[{server.kind}]", q, producer.ids, rec, fleet,
            kills=len(fleet.killed), kills_while_pushing=kills,
            workers_started=len(fleet.procs),
        )  # fmt: skip
        assert kills >= 10
        assert_sound(t, rec, producer.ids, fleet)
        exited = fleet.exited_before_stop
        assert exited == {}, f"workers exited by themselves: {exited}\n{fleet.log_tail()}"
    finally:
        producer.stop()
        fleet.stop()
        q.close()


def test_server_restart_with_aof(tmp_path: Path) -> None:
    """The server is stopped twice mid-run (SIGTERM, then SIGKILL) and restarted.

    During the second outage a new worker is started: it must wait for the server
    instead of exiting.
    """
    server = EmbeddedServer(
        find_valkey_server(),
        port=free_port(),
        workdir=tmp_path / "server",
        extra_args=["--appendonly", "yes", "--appendfsync", "always"],
    )
    server.start()
    queue = unique_queue("chaos-restart")
    q = FairQueue(resilient_client(server.port), queue, retry_base_seconds=0)
    fleet = Fleet(server.url, queue, tmp_path, env={"FAIRQUE_WORKER__LEASE_SECONDS": "3"})
    producer = Producer(q, seed=2)
    try:
        assert q.client.config_get("appendfsync") == {"appendfsync": "always"}
        start_fleet(fleet, WORKERS - 1, lambda: registered(q))
        producer.start()
        until(fleet.all_busy, 30, "every worker to run tasks")
        time.sleep(1.0)
        down = time.monotonic()
        server.stop()  # SIGTERM: a clean shutdown
        time.sleep(1.5)
        server.start()
        outages = [time.monotonic() - down]
        time.sleep(2.5)
        pid = server.pid
        assert pid is not None
        down = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        until(lambda: not server.running, 5, "the server to die")
        late = fleet.spawn()  # a worker starting while the server is down...
        until(lambda: fleet.ready(late), 30, "the new worker to import its handlers")
        time.sleep(2.0)  # ...finds no server for 2 s: it must wait, not exit
        server.start()
        outages.append(time.monotonic() - down)
        faults_end = time.time()
        wait_recovered(fleet, faults_end, RECOVERY_SECONDS)
        producer.finish()
        wait_drained(q, len(producer.ids), DRAIN_SECONDS)
        fleet.stop()
        rec = Records.read(fleet.record_dir)
        t = tally(
            "server-restart-aof", q, producer.ids, rec, fleet,
            outages="+".join(f"{o:.1f}s" for o in outages),
        )  # fmt: skip
        assert_sound(t, rec, producer.ids, fleet)
        assert_recovered(fleet, rec, faults_end, survivors=WORKERS)
    finally:
        producer.stop()
        fleet.stop()
        q.close()
        server.stop()


def test_connection_cuts_and_stalls(tmp_path: Path) -> None:
    """Producer and workers talk through a proxy that cuts every connection every ~1 s.

    Every third event is instead a stall of 2 s, past the clients' 1 s socket
    timeout. Five users are capped at 2 tasks in flight, so a leaked in-flight
    count leaves tasks that are never served.
    """
    server = EmbeddedServer(find_valkey_server(), workdir=tmp_path / "server")
    server.start()
    proxy = FaultProxy(server.port)
    queue = unique_queue("chaos-cut")
    q = FairQueue(resilient_client(proxy.port, socket_timeout=1.0), queue, retry_base_seconds=0)
    direct = FairQueue.from_url(server.url, queue)  # the test's own look, never cut
    fleet = Fleet(
        f"{proxy.url}?socket_timeout=1", queue, tmp_path,
        env={"FAIRQUE_WORKER__LEASE_SECONDS": "3"},
    )  # fmt: skip
    producer = Producer(q, seed=3)
    try:
        for u in range(5):
            direct.set_user_limits(f"u{u}", max_in_flight=2)
        start_fleet(fleet, WORKERS, lambda: registered(direct))
        producer.start()
        until(fleet.all_busy, 30, "every worker to run tasks")
        proxy.chaos((0.7, 1.2), stall_seconds=2.0, stall_every=3, seed=3)
        until(lambda: proxy.stats.cuts >= 6 and proxy.stats.stalls >= 3, 60, "the proxy's chaos")
        proxy.stop_chaos()
        faults_end = time.time()
        wait_recovered(fleet, faults_end, RECOVERY_SECONDS)
        producer.finish()
        wait_drained(direct, len(producer.ids), DRAIN_SECONDS)
        fleet.stop()
        rec = Records.read(fleet.record_dir)
        s = proxy.stats
        t = tally(
            "connection-cuts", direct, producer.ids, rec, fleet,
            cuts=s.cuts, stalls=s.stalls, connections_cut=s.connections_cut,
            connections_stalled=s.connections_stalled,
        )  # fmt: skip
        assert s.connections_cut > s.cuts  # the workers' connections were among them
        assert_sound(t, rec, producer.ids, fleet)
        assert_recovered(fleet, rec, faults_end, survivors=WORKERS)
    finally:
        producer.stop()
        fleet.stop()
        proxy.close()
        q.close()
        direct.close()
        server.stop()
