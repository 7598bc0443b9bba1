"""The worker outlives Kafka (issue 20, item 1), on a real broker this test starts and stops.

Started while the broker is down, the worker stays up and unready (`/healthz` 200, `/readyz`
503 saying why), trying again with backoff and logging each kind of failure once. Once the
broker's port accepts connections the worker connects within its probe interval and consumes.
Stopped for 60 s mid-run, the broker takes nothing with it: the worker does not exit, its
readiness drops and comes back, and a stock sink fed by the chunk topic ends with exactly the
chunks of the current documents (the lifecycle's updates and deletes included: none stale,
none missing).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support import kafka_io
from tests.support.lifecycle_changelog import PARAMS, changelog, expected_chunks, sink_contents
from tests.support.lifecycle_changelog import produce as produce_records
from tests.support.network import free_port, port_accepts, until
from tests.support.network import try_get as http_get
from tests.support.private_broker import PrivateBroker
from worker.kafka.link_policy import JITTER, PROBE_CAP_S

pytestmark = pytest.mark.kafka

OUTAGE_S = 60.0


def failures(port: int) -> float:
    """chunkstream_kafka_connection_failures_total, all kinds."""
    answer = http_get(port, "/metrics")
    assert answer is not None
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in answer[1].splitlines()
        if line.startswith("chunkstream_kafka_connection_failures_total{")
    )


async def committed(broker: PrivateBroker, group: str) -> int:
    """The group's committed offsets, summed over the input's partitions."""
    return sum((await kafka_io.committed_offsets(broker.bootstrap, group)).values())


async def committed_at_least(
    broker: PrivateBroker, group: str, count: int, timeout_s: float
) -> None:
    deadline = time.monotonic() + timeout_s
    while await committed(broker, group) < count:
        assert time.monotonic() < deadline, f"{group}: fewer than {count} committed"
        await asyncio.sleep(0.05)


def log_time(entry: dict[str, Any]) -> float:
    return dt.datetime.fromisoformat(entry["time"]).timestamp()


def each_kind_logged_once(log: Path) -> list[str]:
    """The kinds of the "kafka unreachable" lines, checking that no kind is logged twice in a
    row without a recovery between."""
    kinds: list[str] = []
    last: str | None = None
    for line in log.read_text(errors="replace").splitlines():
        if not line.startswith("{"):
            continue
        entry = json.loads(line)
        if entry.get("message") == "kafka reachable":
            last = None
        elif entry.get("message") == "kafka unreachable":
            assert entry["kind"] != last, f"{entry['kind']} logged again while still down"
            last = entry["kind"]
            kinds.append(entry["kind"])
    return kinds


@pytest.mark.timeout(1200)
async def test_worker_waits_for_kafka_and_outlives_an_outage(
    tmp_path: Path, topic_names: dict[str, str]
) -> None:
    broker = PrivateBroker(tmp_path / "broker")
    records, truth = changelog(3000, documents=400, seed=31)
    port = free_port()
    settings = kafka_io.make_settings(
        broker.bootstrap,
        topic_names,
        strategy="sentence",
        strategy_params=PARAMS,
        session_timeout_ms="6000",
        heartbeat_interval_ms="1000",
        metrics_host="127.0.0.1",
        metrics_port=str(port),
    )
    first, second = len(records) // 3, 2 * len(records) // 3
    await asyncio.to_thread(broker.start)
    try:
        await kafka_io.create(settings, partitions=4)
        await produce_records(broker.bootstrap, settings.input_topic, records[:first])
    finally:
        await asyncio.to_thread(broker.stop)

    log = tmp_path / "worker.log"
    proc = kafka_io.worker_process(settings, log)
    try:
        # 1. Kafka down: up, alive, unready with the reason, trying again.
        await until(lambda: http_get(port, "/readyz") is not None, 120, "the health server")
        status, body = http_get(port, "/readyz") or (0, "")
        assert status == 503, body
        assert json.loads(body)["kafka"].startswith("unreachable: connection refused"), body
        assert http_get(port, "/healthz") == (200, '{"status":"ok"}\n')
        await until(lambda: failures(port) >= 4, 60, "four failed attempts")
        assert proc.poll() is None, "the worker exited while Kafka was down"
        assert (http_get(port, "/healthz") or (0,))[0] == 200
        assert each_kind_logged_once(log) == ["refused"]

        # 2. The broker comes back: connected within the probe interval, then consuming.
        starting = asyncio.create_task(asyncio.to_thread(broker.start))
        while not port_accepts(broker.port):
            assert not starting.done() or starting.exception() is None
            await asyncio.sleep(0.05)
        accepted = time.time()
        await starting
        await until(lambda: (http_get(port, "/readyz") or (0,))[0] == 200, 120, "ready")
        ready_s = time.time() - accepted
        await committed_at_least(broker, settings.group_id, 1, 120)
        consuming_s = time.time() - accepted
        connecting = kafka_io.log_events(log, "kafka accepts connections: connecting")
        assert connecting, "no connection attempt logged after the port opened"
        # What the design guarantees whatever the machine's speed: the next probe after the
        # port opens is at most PROBE_CAP_S (+ jitter) away. Asserted with a wide margin; the
        # issue's 10 s to ready is measured and printed (docs/benchmarks.md records it).
        noticed_s = log_time(connecting[0]) - accepted
        assert noticed_s <= 2 * PROBE_CAP_S * (1 + JITTER) + 5, noticed_s
        print(
            f"\nport accepting -> attempt {noticed_s:.1f} s, ready {ready_s:.1f} s, "
            f"first commit {consuming_s:.1f} s"
        )

        # 3. Stop the broker mid-run for 60 s: the worker stays, unready; then finishes.
        await produce_records(broker.bootstrap, settings.input_topic, records[first:second])
        await committed_at_least(broker, settings.group_id, first + 100, 120)
        in_flight = len(records[:second]) - await committed(broker, settings.group_id)
        await asyncio.to_thread(broker.stop)
        stopped = time.monotonic()
        dropped = False
        while time.monotonic() - stopped < OUTAGE_S:
            assert proc.poll() is None, "the worker exited during the outage"
            health = await asyncio.to_thread(http_get, port, "/healthz")
            assert health is not None, "the health server stopped answering"
            assert health[0] == 200, health
            ready = await asyncio.to_thread(http_get, port, "/readyz")
            assert ready is not None
            if ready[0] == 503:
                assert json.loads(ready[1])["kafka"].startswith("unreachable: "), ready
                dropped = True
            await asyncio.sleep(1)
        assert dropped, "readiness never dropped while the broker was down"
        await asyncio.to_thread(broker.start)
        await produce_records(broker.bootstrap, settings.input_topic, records[second:])
        await kafka_io.wait_committed_to_end(
            broker.bootstrap, settings.group_id, settings.input_topic, timeout_s=300
        )
        assert proc.poll() is None, "the worker exited"
        await until(lambda: (http_get(port, "/readyz") or (0,))[0] == 200, 60, "ready again")
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 60) == 0

        held = await sink_contents(broker.bootstrap, settings.output_topic, tmp_path / "sink.db")
        expected = expected_chunks(truth, settings)
        assert not set(held) - set(expected), "stale chunks in the sink"
        assert not set(expected) - set(held), "chunks missing from the sink"
        assert held == expected
        assert await kafka_io.dead_letters(broker.bootstrap, settings.dlq_topic) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        await asyncio.to_thread(broker.stop)

    kinds = each_kind_logged_once(log)
    client_lines = sum('"logger":"aiokafka' in line for line in log.read_text().splitlines())
    print(f"not committed at the stop: {in_flight}; kinds {kinds}; aiokafka lines {client_lines}")
    # Before: ~2,000 lines of the Kafka client per second of outage.
    assert client_lines < 1000
    assert len(kafka_io.log_events(log, "kafka reachable")) >= 2  # the start and the outage


@pytest.mark.timeout(900)
async def test_a_worker_stopped_during_an_outage_exits_in_time_and_loses_nothing(
    tmp_path: Path, topic_names: dict[str, str]
) -> None:
    """SIGTERM while Kafka is away (a rollout or a scale-down during the outage): the worker
    exits 0 within the pod's grace period (45 s) although nothing can be flushed, committed or
    left; what it had not committed is done by the next worker."""
    broker = PrivateBroker(tmp_path / "broker")
    records, truth = changelog(6000, documents=600, seed=37)
    port = free_port()
    settings = kafka_io.make_settings(
        broker.bootstrap,
        topic_names,
        strategy="sentence",
        strategy_params=PARAMS,
        metrics_host="127.0.0.1",
        metrics_port=str(port),
    )
    await asyncio.to_thread(broker.start)
    log = tmp_path / "worker.log"
    proc = kafka_io.worker_process(settings, log)
    try:
        await kafka_io.create(settings, partitions=4)
        await produce_records(broker.bootstrap, settings.input_topic, records)
        await committed_at_least(broker, settings.group_id, 100, 120)
        left = len(records) - await committed(broker, settings.group_id)
        await asyncio.to_thread(broker.stop)
        await until(
            lambda: (http_get(port, "/readyz") or (0, ""))[0] == 503, 60, "unready in the outage"
        )
        stopping = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 45) == 0
        print(f"\nexited {time.monotonic() - stopping:.1f} s after SIGTERM during the outage")
        print(f"records not committed when the broker stopped: {left}")
        await asyncio.to_thread(broker.start)
        successor = kafka_io.worker_process(settings, tmp_path / "successor.log")
        try:
            await kafka_io.wait_committed_to_end(
                broker.bootstrap, settings.group_id, settings.input_topic, timeout_s=300
            )
        finally:
            successor.send_signal(signal.SIGTERM)
            assert await asyncio.to_thread(successor.wait, 60) == 0
        held = await sink_contents(broker.bootstrap, settings.output_topic, tmp_path / "sink.db")
        assert held == expected_chunks(truth, settings)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        await asyncio.to_thread(broker.stop)
