"""A zombie cannot commit: a member paused (SIGSTOP) with a transaction open, whose partitions
move to another member meanwhile, is fenced by the new owner's producers. Nothing it wrote
becomes visible to ``read_committed``. Once it runs again it finds its partitions lost (its
session expired): it aborts, commits nothing, drops them and rejoins the group, still running."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support import kafka_io
from tests.support.exactly_once_outcome import chunk_output, duplicates, expected_output
from tests.support.lifecycle_changelog import PARAMS, changelog, produce

pytestmark = pytest.mark.kafka


async def test_a_paused_member_whose_partitions_moved_cannot_commit(
    kafka_bootstrap: str, topic_names: dict[str, str], tmp_path: Path
) -> None:
    records, _ = changelog(240, documents=60, seed=47)
    common = {
        "strategy": "sentence",
        "strategy_params": PARAMS,
        "processing_guarantee": "exactly-once",
        "session_timeout_ms": "6000",
        "heartbeat_interval_ms": "1000",
    }
    # The zombie-to-be commits only after the test is over (its transaction stays open).
    zombie_settings = kafka_io.make_settings(
        kafka_bootstrap, topic_names, commit_interval_ms="50000", **common
    )
    owner_settings = kafka_io.make_settings(kafka_bootstrap, topic_names, **common)
    await kafka_io.create(owner_settings, partitions=3)
    await produce(kafka_bootstrap, owner_settings.input_topic, records)
    expected = await expected_output(owner_settings)
    zombie_log, owner_log = tmp_path / "zombie.log", tmp_path / "owner.log"
    zombie = kafka_io.worker_process(zombie_settings, zombie_log)
    procs: list[subprocess.Popen[bytes]] = [zombie]
    try:
        # It has written everything the input calls for, in transactions still open.
        deadline = time.monotonic() + 120
        while True:
            written = await chunk_output(
                kafka_bootstrap, owner_settings.output_topic, committed=False
            )
            if set(written.events) >= expected.events:
                break
            assert time.monotonic() < deadline, "the first member never wrote it all"
            await asyncio.sleep(0.5)
        assert await kafka_io.committed_offsets(kafka_bootstrap, owner_settings.group_id) == {}
        zombie.send_signal(signal.SIGSTOP)
        # Its session expires; the other member gets every partition and fences it.
        procs.append(kafka_io.worker_process(owner_settings, owner_log))
        await kafka_io.wait_committed_to_end(
            kafka_bootstrap, owner_settings.group_id, owner_settings.input_topic, timeout_s=180
        )
        committed = await kafka_io.committed_offsets(kafka_bootstrap, owner_settings.group_id)
        seen = await chunk_output(kafka_bootstrap, owner_settings.output_topic)
        assert duplicates(seen) == {}
        assert set(seen.events) == expected.events
        # Both wrote every event; only the owner's became visible.
        raw = await chunk_output(kafka_bootstrap, owner_settings.output_topic, committed=False)
        assert all(raw.events[key] >= 2 for key in expected.events)

        assigned = len(kafka_io.log_events(zombie_log, "partitions assigned"))
        zombie.send_signal(signal.SIGCONT)
        await kafka_io.wait_for_log(zombie_log, "partitions lost", timeout_s=120)
        for _ in range(1200):  # it rejoins: a new assignment (perhaps of no partition)
            if len(kafka_io.log_events(zombie_log, "partitions assigned")) > assigned:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the resumed member never rejoined")
        assert zombie.poll() is None, "the resumed member stopped"
        assert not kafka_io.log_events(zombie_log, "transaction failed; stopping the worker")
        after = await chunk_output(kafka_bootstrap, owner_settings.output_topic)
        assert after == seen
        assert (
            await kafka_io.committed_offsets(kafka_bootstrap, owner_settings.group_id) == committed
        )
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=90)
