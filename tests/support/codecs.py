"""Compressed input for the codec tests: batches produced in a chosen codec, a cramjam that
cannot decode one, and waiting for a partition's commit."""

from __future__ import annotations

import asyncio
from pathlib import Path

from aiokafka import AIOKafkaProducer

from tests.support import kafka_io
from worker.config import Settings


async def produce_compressed(
    bootstrap: str,
    topic: str,
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]],
    codec: str | None,
    *,
    partition: int | None = None,
) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", compression_type=codec, linger_ms=50
    )
    await producer.start()
    try:
        acks = [
            await producer.send(topic, value=v, key=k, headers=h, partition=partition)
            for k, v, h in records
        ]
        await asyncio.gather(*acks)
    finally:
        await producer.stop()


def _shadow_cramjam(tmp_path: Path) -> Path:
    """A directory that, first on PYTHONPATH, makes `import cramjam` fail as on an install
    without the codec library (aiokafka then has gzip only)."""
    shadow = tmp_path / "no-cramjam"
    shadow.mkdir()
    (shadow / "cramjam.py").write_text('raise ImportError("cramjam hidden by the test")\n')
    return shadow


async def _wait_partition_committed(
    bootstrap: str, settings: Settings, partition: int, end: int
) -> dict[int, int]:
    for _ in range(600):
        committed = {
            tp.partition: o
            for tp, o in (await kafka_io.committed_offsets(bootstrap, settings.group_id)).items()
        }
        if committed.get(partition, 0) >= end:
            return committed
        await asyncio.sleep(0.2)
    raise TimeoutError(f"partition {partition} not committed to {end}")
