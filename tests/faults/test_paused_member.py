"""A member paused past its session timeout and resumed (SIGSTOP, SIGCONT) must not lose what
another member wrote meanwhile: issue 45's five-step sequence, on the real broker, under both
guarantees.

1. worker A alone chunks documents d0..d3 (committed);
2. A is stopped (SIGSTOP); worker B joins and, once A's session has expired, owns both input
   partitions; documents x0..x7 are produced and B chunks and commits them;
3. A is resumed (SIGCONT): its session is gone, it rejoins;
4. B leaves cleanly (SIGTERM): A owns both partitions again;
5. x0..x7 are deleted (tombstones): A must tombstone every chunk of theirs.

Before the fix, A treated its revocation on resuming as a clean hand-over and checkpointed its
local store at the changelog's end, past B's records, which it never read: the deletes found
nothing to retract (``unknown_delete``) and every sink kept x0..x7 for good.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
from pathlib import Path

import pytest

from tests.support import kafka_io
from tests.support.lifecycle_changelog import (
    PARAMS,
    Truth,
    expected_chunks,
    produce,
    sink_contents,
)
from worker.config import Settings
from worker.wire.codec import EventEncoder
from worker.wire.events import DocumentEvent

pytestmark = pytest.mark.kafka

_SESSION_MS = 6000


def _text(doc_id: str) -> str:
    return " ".join(
        f"Sentence {n} of {doc_id} says where its partition's state is kept." for n in range(40)
    )


def _document(doc_id: str) -> bytes:
    return EventEncoder("msgpack").encode(DocumentEvent(id=doc_id, text=_text(doc_id)))


async def _assigned_both(log: Path, after: int, timeout_s: float = 120) -> None:
    """Until the worker logging to ``log`` has had an assignment of both input partitions,
    its ``after``-th or later, and restored their state."""
    for _ in range(int(timeout_s * 10)):
        events = kafka_io.log_events(log, "partitions assigned")
        restored = kafka_io.log_events(log, "state restored")
        if len(events) > after and len(events[-1]["partitions"]) == 2 and restored:
            return
        await asyncio.sleep(0.1)
    raise TimeoutError(f"{log.name}: no assignment of both partitions")


@pytest.mark.timeout(600)
@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
async def test_a_member_resumed_after_its_session_expired_retracts_what_another_wrote(
    kafka_bootstrap: str, topic_names: dict[str, str], tmp_path: Path, guarantee: str
) -> None:
    settings: Settings = kafka_io.make_settings(
        kafka_bootstrap,
        topic_names,
        strategy="sentence",
        strategy_params=PARAMS,
        processing_guarantee=guarantee,
        session_timeout_ms=str(_SESSION_MS),
        heartbeat_interval_ms="1000",
    )
    await kafka_io.create(settings, partitions=2)
    topic = settings.input_topic
    log_a, log_b = tmp_path / "a.log", tmp_path / "b.log"
    first = [f"d{n}" for n in range(4)]
    later = [f"x{n}" for n in range(8)]
    a = kafka_io.worker_process(settings, log_a)
    procs: list[subprocess.Popen[bytes]] = [a]
    try:
        await _assigned_both(log_a, 0)
        await produce(kafka_bootstrap, topic, [(d.encode(), _document(d)) for d in first])
        await kafka_io.wait_committed_to_end(kafka_bootstrap, settings.group_id, topic, 120)

        a.send_signal(signal.SIGSTOP)
        b = kafka_io.worker_process(settings, log_b)
        procs.append(b)
        await _assigned_both(log_b, 0)  # A's session expired: B owns everything
        await produce(kafka_bootstrap, topic, [(d.encode(), _document(d)) for d in later])
        await kafka_io.wait_committed_to_end(kafka_bootstrap, settings.group_id, topic, 120)

        assigned_a = len(kafka_io.log_events(log_a, "partitions assigned"))
        a.send_signal(signal.SIGCONT)
        # A rejoins (B's assignment changes too), then B leaves cleanly.
        for _ in range(1200):
            if len(kafka_io.log_events(log_a, "partitions assigned")) > assigned_a:
                break
            await asyncio.sleep(0.1)
        b.send_signal(signal.SIGTERM)
        assert b.wait(timeout=90) == 0
        await _assigned_both(log_a, assigned_a)

        await produce(kafka_bootstrap, topic, [(d.encode(), None) for d in later])
        await kafka_io.wait_committed_to_end(kafka_bootstrap, settings.group_id, topic, 120)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=90)

    isolation = "read_committed" if guarantee == "exactly-once" else "read_uncommitted"
    held = await sink_contents(
        kafka_bootstrap, settings.output_topic, tmp_path / "sink.db", isolation_level=isolation
    )
    truth = Truth(texts={d: _text(d) for d in first})
    expected = expected_chunks(truth, settings)
    stale = {cid for cid in held if cid not in expected}
    assert not stale, f"{len(stale)} chunks of deleted documents are still in the sink"
    assert held == expected
    assert await kafka_io.dead_letters(kafka_bootstrap, settings.dlq_topic) == []


@pytest.mark.timeout(600)
@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
async def test_a_member_paused_while_busy_works_on_once_its_partitions_come_back(
    kafka_bootstrap: str, topic_names: dict[str, str], tmp_path: Path, guarantee: str
) -> None:
    """Paused (SIGSTOP) with documents in flight and writes queued, resumed after its session
    expired: it drops what it had, rejoins, and chunks everything that comes after, alone."""
    settings: Settings = kafka_io.make_settings(
        kafka_bootstrap,
        topic_names,
        strategy="sentence",
        strategy_params=PARAMS,
        processing_guarantee=guarantee,
        session_timeout_ms=str(_SESSION_MS),
        heartbeat_interval_ms="1000",
        max_in_flight_documents="16",
        linger_ms="50",  # writes sit queued when the pause comes
    )
    await kafka_io.create(settings, partitions=2)
    topic = settings.input_topic
    log_a, log_b = tmp_path / "a.log", tmp_path / "b.log"
    first = [f"d{n}" for n in range(400)]
    later = [f"x{n}" for n in range(40)]
    a = kafka_io.worker_process(settings, log_a)
    procs: list[subprocess.Popen[bytes]] = [a]
    try:
        await _assigned_both(log_a, 0)
        await produce(kafka_bootstrap, topic, [(d.encode(), _document(d)) for d in first])
        for _ in range(600):  # busy: some committed, more to do
            committed = await kafka_io.committed_offsets(kafka_bootstrap, settings.group_id)
            if sum(committed.values()) >= 40:
                break
            await asyncio.sleep(0.05)
        a.send_signal(signal.SIGSTOP)
        b = kafka_io.worker_process(settings, log_b)
        procs.append(b)
        await _assigned_both(log_b, 0)
        await kafka_io.wait_committed_to_end(kafka_bootstrap, settings.group_id, topic, 120)
        assigned_a = len(kafka_io.log_events(log_a, "partitions assigned"))
        a.send_signal(signal.SIGCONT)
        for _ in range(1200):
            if len(kafka_io.log_events(log_a, "partitions assigned")) > assigned_a:
                break
            await asyncio.sleep(0.1)
        b.send_signal(signal.SIGTERM)
        assert b.wait(timeout=90) == 0
        await _assigned_both(log_a, assigned_a)
        assert kafka_io.log_events(log_a, "partitions lost")
        await produce(kafka_bootstrap, topic, [(d.encode(), _document(d)) for d in later])
        await produce(kafka_bootstrap, topic, [(d.encode(), None) for d in first[:100]])
        await kafka_io.wait_committed_to_end(kafka_bootstrap, settings.group_id, topic, 120)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=90)

    isolation = "read_committed" if guarantee == "exactly-once" else "read_uncommitted"
    held = await sink_contents(
        kafka_bootstrap, settings.output_topic, tmp_path / "sink.db", isolation_level=isolation
    )
    truth = Truth(texts={d: _text(d) for d in first[100:] + later})
    assert held == expected_chunks(truth, settings)
    assert await kafka_io.dead_letters(kafka_bootstrap, settings.dlq_topic) == []
