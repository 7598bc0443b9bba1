"""Document lifecycle on the real broker: a stock sink ends with exactly the current documents.

Random changelogs over hundreds of documents — creates, one-paragraph edits, appends,
truncations, reorders, deletes (tombstones) and re-sends of old versions — go through real
worker processes while one is killed with SIGKILL and the group rebalances. The chunk topic is
then applied by the reference sink (worker.cli.sink: upsert by key, delete on null, nothing else),
and must hold exactly the chunks that chunking each surviving document's last version gives:
the same ids, the same texts, none stale, none missing.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

from tests.support import kafka_io
from tests.support.lifecycle_changelog import (
    PARAMS,
    changelog,
    expected_chunks,
    produce,
    sink_contents,
)

pytestmark = pytest.mark.kafka


@pytest.mark.parametrize("unchanged", ["emit", "skip"])
async def test_a_stock_sink_holds_exactly_the_current_documents_through_kill_and_rebalance(
    kafka_bootstrap: str, topic_names: dict[str, str], tmp_path: Path, unchanged: str
) -> None:
    records, truth = changelog(900, documents=220, seed=19 if unchanged == "emit" else 20)
    assert any(value is None for _, value in records)  # deletes happen
    settings = kafka_io.make_settings(
        kafka_bootstrap,
        topic_names,
        strategy="sentence",
        strategy_params=PARAMS,
        unchanged_chunks=unchanged,
        session_timeout_ms="6000",
        heartbeat_interval_ms="1000",
    )
    await kafka_io.create(settings, partitions=4)
    first, second, third = len(records) * 2 // 5, len(records) * 3 // 4, len(records)
    logs = [tmp_path / f"worker-{n}.log" for n in range(3)]
    procs = [kafka_io.worker_process(settings, logs[0])]
    try:
        await produce(kafka_bootstrap, settings.input_topic, records[:first])
        # Kill -9 once it has committed some work and while it has more to do.
        for _ in range(600):
            committed = await kafka_io.committed_offsets(kafka_bootstrap, settings.group_id)
            if sum(committed.values()) > first // 4:
                break
            await asyncio.sleep(0.1)
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait()
        # Two new members: a rebalance, and every partition's state restored by someone.
        procs += [kafka_io.worker_process(settings, log) for log in logs[1:]]
        await produce(kafka_bootstrap, settings.input_topic, records[first:second])
        # Once it has partitions, one leaves cleanly mid-stream: another rebalance (its
        # partitions checkpointed).
        for _ in range(1200):
            if kafka_io.log_events(logs[2], "partitions assigned"):
                break
            await asyncio.sleep(0.1)
        procs[2].send_signal(signal.SIGTERM)
        assert procs[2].wait(timeout=60) == 0
        await produce(kafka_bootstrap, settings.input_topic, records[second:third])
        await kafka_io.wait_committed_to_end(
            kafka_bootstrap, settings.group_id, settings.input_topic, timeout_s=180
        )
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=60)

    held = await sink_contents(kafka_bootstrap, settings.output_topic, tmp_path / "sink.db")
    expected = expected_chunks(truth, settings)
    stale = set(held) - set(expected)
    missing = set(expected) - set(held)
    assert not stale, f"{len(stale)} stale chunks in the sink"
    assert not missing, f"{len(missing)} chunks missing from the sink"
    assert held == expected
    assert await kafka_io.dead_letters(kafka_bootstrap, settings.dlq_topic) == []
    # The new members restored state from the changelog before consuming.
    restored = [e for log in logs[1:] for e in kafka_io.log_events(log, "state restored")]
    assert restored
    assert len(truth.texts) > 50  # the test means something: many documents survive
