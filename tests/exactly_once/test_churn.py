"""Exactly-once on the real broker through churn: a 3-member group of worker processes over
hundreds of documents with edits and deletes, members killed with SIGKILL and stopped with
SIGTERM while it runs. A ``read_committed`` reader of the chunk topic then sees every chunk
event of every processed version exactly once (none twice, none missing), every tombstone
exactly as often as the versions call for it, and the reference sink over it holds exactly the
direct chunking of each surviving document's last version."""

from __future__ import annotations

import asyncio
import signal
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from tests.support import kafka_io
from tests.support.exactly_once_outcome import (
    EventKey,
    Output,
    chunk_output,
    committed_sink,
    duplicates,
    expected_output,
)
from tests.support.librdkafka import decode, read_committed
from tests.support.lifecycle_changelog import PARAMS, changelog, expected_chunks, produce

pytestmark = pytest.mark.kafka


async def _until_committed(bootstrap: str, group: str, at_least: int) -> None:
    """Wait (generously) until the group's committed offsets add up to ``at_least``."""
    for _ in range(1200):
        committed = await kafka_io.committed_offsets(bootstrap, group)
        if sum(committed.values()) >= at_least:
            return
        await asyncio.sleep(0.1)
    raise TimeoutError(f"group {group} never committed {at_least} records")


def other_reader(bootstrap: str, topic: str) -> Output:
    """The chunk topic as librdkafka reads it with read_committed, decoded with msgpack."""
    events: Counter[EventKey] = Counter()
    tombstones: Counter[str] = Counter()
    for message in read_committed(bootstrap, topic):
        key = message.key().decode()
        if message.value() is None:
            tombstones[key] += 1
            continue
        event, _, _ = decode(message)
        assert event["chunk_id"] == key
        source = event["source"]
        events[(source["partition"], source["offset"], key)] += 1
    return Output(events, tombstones)


async def test_a_read_committed_reader_sees_each_event_once_through_kills_and_rebalances(
    kafka_bootstrap: str, topic_names: dict[str, str], tmp_path: Path
) -> None:
    records, truth = changelog(900, documents=220, seed=38)
    assert any(value is None for _, value in records)  # deletes happen
    settings = kafka_io.make_settings(
        kafka_bootstrap,
        topic_names,
        strategy="sentence",
        strategy_params=PARAMS,
        processing_guarantee="exactly-once",
        session_timeout_ms="6000",
        heartbeat_interval_ms="1000",
        # Few records per commit: the kills land among many open transactions.
        commit_interval_ms="150",
        max_in_flight_documents="16",
    )
    await kafka_io.create(settings, partitions=6)
    logs = [tmp_path / f"worker-{n}.log" for n in range(5)]
    procs: list[subprocess.Popen[bytes]] = [
        kafka_io.worker_process(settings, log) for log in logs[:3]
    ]
    quarter = len(records) // 4
    try:
        await produce(kafka_bootstrap, settings.input_topic, records[:quarter])
        await _until_committed(kafka_bootstrap, settings.group_id, quarter // 4)
        await produce(kafka_bootstrap, settings.input_topic, records[quarter : 2 * quarter])
        # SIGKILL while it works: its open transactions are left to the partitions' next
        # owners, whose producers' start aborts them.
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait(timeout=30)
        procs.append(kafka_io.worker_process(settings, logs[3]))
        await produce(kafka_bootstrap, settings.input_topic, records[2 * quarter : 3 * quarter])
        await _until_committed(kafka_bootstrap, settings.group_id, 2 * quarter)
        # SIGTERM: a clean leave (its transactions committed or aborted) and a rebalance.
        procs[1].send_signal(signal.SIGTERM)
        assert procs[1].wait(timeout=90) == 0
        procs.append(kafka_io.worker_process(settings, logs[4]))
        await produce(kafka_bootstrap, settings.input_topic, records[3 * quarter :])
        # Another SIGKILL, of a member that took over partitions of both.
        procs[2].send_signal(signal.SIGKILL)
        procs[2].wait(timeout=30)
        await kafka_io.wait_committed_to_end(
            kafka_bootstrap, settings.group_id, settings.input_topic, timeout_s=240
        )
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        exits = [proc.wait(timeout=90) for proc in procs]
    assert exits == [-signal.SIGKILL, 0, -signal.SIGKILL, 0, 0]

    seen = await chunk_output(kafka_bootstrap, settings.output_topic)
    expected = await expected_output(settings)
    assert duplicates(seen) == {}, "a chunk event of one version was committed twice"
    missing = expected.events - set(seen.events)
    extra = set(seen.events) - expected.events
    assert not missing, f"{len(missing)} chunk events missing"
    assert not extra, f"{len(extra)} chunk events nothing called for"
    assert seen.tombstones == expected.tombstones
    # The same through librdkafka (read_committed is its default; set here anyway) and a
    # msgpack decoder that is not msgspec's: no client of ours decides what was committed.
    other = other_reader(kafka_bootstrap, settings.output_topic)
    assert other == seen
    held = await committed_sink(kafka_bootstrap, settings.output_topic, tmp_path / "sink.db")
    assert held == expected_chunks(truth, settings)
    assert await kafka_io.dead_letters(kafka_bootstrap, settings.dlq_topic) == []
    assert len(truth.texts) > 50  # the comparison means something: many documents survive
