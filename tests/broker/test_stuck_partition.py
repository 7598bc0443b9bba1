"""Every stuck partition is visible (issue 20, item 4): a partition the worker cannot move on
shows a growing ``chunkstream_partition_commit_age_seconds`` while its neighbour, committed and
idle, shows 0 — on a pod whose one-per-process last-commit time keeps looking healthy.

The stuck partition is real: lz4 batches on partition 0 read by a worker process whose codec
library is hidden (as tests/broker/test_codecs.py does), plain records on partition 1.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

from tests.support import kafka_io
from tests.support.codecs import _shadow_cramjam, _wait_partition_committed, produce_compressed
from tests.support.generated_docs import make_docs
from tests.support.network import free_port, scrape

pytestmark = pytest.mark.kafka

AGE = "chunkstream_partition_commit_age_seconds"
BACKLOG = "chunkstream_backlog_seconds"


async def test_a_stuck_partition_shows_its_commit_age_beside_a_healthy_one(
    kafka_bootstrap: str, topic_names: dict[str, str], tmp_path: Path
) -> None:
    port = free_port()
    settings = kafka_io.make_settings(
        kafka_bootstrap, topic_names, compression_type="none", metrics_port=port
    )
    await kafka_io.create(settings, partitions=2)
    stuck, healthy = make_docs(5, seed=3, prefix="lz4"), make_docs(12, seed=4, prefix="plain")
    input_topic = settings.input_topic
    await produce_compressed(
        kafka_bootstrap, input_topic, kafka_io.encode_documents(stuck), "lz4", partition=0
    )
    await produce_compressed(
        kafka_bootstrap, input_topic, kafka_io.encode_documents(healthy), None, partition=1
    )
    no_codec = {"PYTHONPATH": str(_shadow_cramjam(tmp_path))}
    proc = kafka_io.worker_process(settings, tmp_path / "worker.log", no_codec)
    try:
        await _wait_partition_committed(kafka_bootstrap, settings, 1, len(healthy))
        first = await scrape(port)
        while first.get(AGE, {}).get((("partition", "0"),), 0.0) <= 0:
            await asyncio.sleep(0.5)
            first = await scrape(port)
        await asyncio.sleep(3)
        second = await scrape(port)
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 60) == 0

    p0, p1 = (("partition", "0"),), (("partition", "1"),)
    # The stuck partition's age runs on; the one that committed everything and idles is 0.
    assert second[AGE][p0] > first[AGE][p0] > 0
    assert second[AGE][p1] == 0
    assert second["chunkstream_last_commit_timestamp_seconds"][()] > 0  # the pod did commit
    # Its five records wait: their estimate is positive (the cost per byte measured on the
    # healthy partition's documents); nothing waits on partition 1.
    assert second[BACKLOG][p0] > 0
    assert second[BACKLOG][p1] == 0
