"""Test helpers that talk to the real broker: produce raw records, read topics, read commits."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import CoordinatorLoadInProgressError, GroupCoordinatorNotAvailableError

from worker.app import Worker
from worker.chunking.registry import BuiltStrategy
from worker.config import Settings, load_settings
from worker.kafka.clients import create_topics, worker_topics
from worker.wire.codec import EventEncoder, decode_as
from worker.wire.events import ChunkEvent, DeadLetterEvent, DocumentEvent

REPO = Path(__file__).resolve().parents[2]


def make_settings(bootstrap: str, names: Mapping[str, str], **overrides: Any) -> Settings:
    flags: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "metrics_port": "0",
        "commit_interval_ms": "200",
        **names,
        **{k: str(v) if not isinstance(v, (dict, list)) else v for k, v in overrides.items()},
    }
    return load_settings(flags, env={})


def build_as_worker(settings: Settings) -> BuiltStrategy:
    """The default strategy as a worker with ``settings`` builds it: the same model references
    (worker.inference.serving.build_context), so the same sizes, boundaries and chunk ids
    offline."""
    from worker.inference.serving import build_strategy

    return build_strategy(settings.strategy, settings.strategy_params, settings=settings)


async def create(settings: Settings, partitions: int = 3) -> None:
    """The worker's topics, as `chunkstream topics` makes them (the state changelog compacted
    and co-partitioned with the input)."""
    topics, configs = worker_topics(settings, partitions)
    await create_topics(settings, topics, max_message_bytes=16 * 1024 * 1024, configs=configs)


async def produce_raw(
    bootstrap: str,
    topic: str,
    records: Sequence[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]],
    *,
    partition: int | None = None,
) -> None:
    """Send (key, value, headers) records in order and wait for every ack."""
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", max_request_size=16 * 1024 * 1024
    )
    try:  # stopped even when it could not start (a broker away): or it is left unclosed
        await producer.start()
        acks = [
            await producer.send(topic, value=v, key=k, headers=h, partition=partition)
            for k, v, h in records
        ]
        await asyncio.gather(*acks)
    finally:
        await producer.stop()


def encode_documents(
    docs: Sequence[DocumentEvent], encoding: str = "msgpack"
) -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]]:
    encoder = EventEncoder(encoding)  # type: ignore[arg-type]
    return [(d.id.encode(), encoder.encode(d), encoder.headers()) for d in docs]


async def read_all(bootstrap: str, topic: str, *, idle_s: float = 1.5) -> list[Any]:
    """Every record currently in ``topic`` (reads until the end offsets are reached)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in await partitions_of(consumer, topic)]
        consumer.assign(partitions)
        end = await consumer.end_offsets(partitions)
        await consumer.seek_to_beginning(*partitions)
        records: list[Any] = []
        deadline = time.monotonic() + 60
        while not await _reached(consumer, end):
            if time.monotonic() > deadline:
                raise TimeoutError(f"could not read {topic} to its end")
            batch = await consumer.getmany(timeout_ms=int(idle_s * 1000))
            for rs in batch.values():
                records.extend(rs)
        return records
    finally:
        await consumer.stop()


async def partitions_of(consumer: AIOKafkaConsumer, topic: str) -> list[int]:
    """The partitions of ``topic``, once the consumer has its metadata."""
    await consumer.topics()
    for _ in range(50):
        parts = consumer.partitions_for_topic(topic)
        if parts:
            return sorted(parts)
        await consumer._client.force_metadata_update()
        consumer._client.add_topic(topic)
        await asyncio.sleep(0.1)
    raise RuntimeError(f"no partitions for {topic}")


async def _reached(consumer: AIOKafkaConsumer, end: dict[TopicPartition, int]) -> bool:
    for tp, offset in end.items():
        if await consumer.position(tp) < offset:
            return False
    return True


async def chunk_events(bootstrap: str, topic: str) -> list[ChunkEvent]:
    return [
        decode_as(r.value, list(r.headers), ChunkEvent) for r in await read_all(bootstrap, topic)
    ]


async def dead_letters(bootstrap: str, topic: str) -> list[DeadLetterEvent]:
    return [
        decode_as(r.value, list(r.headers), DeadLetterEvent)
        for r in await read_all(bootstrap, topic)
    ]


async def committed_offsets(bootstrap: str, group: str) -> dict[TopicPartition, int]:
    # On a fresh broker the group coordinator (the __consumer_offsets topic) takes a moment
    # to appear; that is retriable, everything else is not.
    for attempt in range(100):
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            offsets = await admin.list_consumer_group_offsets(group)
            return {tp: meta.offset for tp, meta in offsets.items()}
        except (GroupCoordinatorNotAvailableError, CoordinatorLoadInProgressError):
            if attempt == 99:
                raise
        finally:
            await admin.close()
        await asyncio.sleep(0.2)
    raise AssertionError("unreachable")


async def end_offsets(bootstrap: str, topic: str) -> dict[TopicPartition, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in await partitions_of(consumer, topic)]
        return dict(await consumer.end_offsets(partitions))
    finally:
        await consumer.stop()


async def wait_committed_to_end(
    bootstrap: str, group: str, topic: str, timeout_s: float = 60, *, idle: bool = False
) -> dict[TopicPartition, int]:
    """Wait until the group's committed offsets reach the end of every partition: at most
    ``timeout_s``, or, ``idle``, until they have not moved for ``timeout_s`` (a stall, on a
    machine of any speed, rather than a slow machine)."""
    end = await end_offsets(bootstrap, topic)
    deadline = time.monotonic() + timeout_s
    last: dict[TopicPartition, int] = {}
    while True:
        committed = await committed_offsets(bootstrap, group)
        if all(committed.get(tp, -1) >= off for tp, off in end.items() if off > 0):
            return committed
        if idle and committed != last:
            last, deadline = committed, time.monotonic() + timeout_s
        if time.monotonic() > deadline:
            waited = f"no commit for {timeout_s:.0f} s" if idle else f"{timeout_s:.0f} s"
            raise TimeoutError(f"group {group} ({waited}): committed {committed}, end {end}")
        await asyncio.sleep(0.3)


async def run_worker_to_end(settings: Settings, timeout_s: float) -> None:
    """Run an in-process Worker until its group has committed the whole input topic, then stop
    it and require a clean exit (0)."""
    from worker.app import Worker

    worker = Worker(settings)
    task = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(
            wait_committed_to_end(
                settings.bootstrap_servers,
                settings.group_id,
                settings.input_topic,
                timeout_s=timeout_s,
            ),
            timeout_s + 20,
        )
    finally:
        worker.request_stop()
        assert await task == 0


def worker_process(
    settings: Settings, log_path: Path, extra_env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start `chunkstream run` as a real OS process, configured through the environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHUNKSTREAM_")}
    env.update(extra_env or {})
    for field, value in msgspec.structs.asdict(settings).items():
        if value is None:
            continue
        if isinstance(value, dict):
            value = ",".join(f"{k}={v}" for k, v in value.items())
        elif isinstance(value, list):
            value = ",".join(value)
        env[f"CHUNKSTREAM_{field.upper()}"] = str(value)
    with log_path.open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "worker.cli", "run"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )


def log_events(log_path: Path, message: str) -> list[dict[str, Any]]:
    """The worker's JSON log lines with the given message."""
    if not log_path.exists():
        return []
    found = []
    for line in log_path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            entry = msgspec.json.decode(line)
            if entry.get("message") == message:
                found.append(entry)
    return found


async def wait_for_log(log_path: Path, message: str, timeout_s: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = log_events(log_path, message)
        if found:
            return found[-1]
        await asyncio.sleep(0.1)
    raise TimeoutError(f"{log_path.name}: no {message!r} line within {timeout_s} s")


async def run_worker_until(worker: Worker, condition: Awaitable[object]) -> int:
    task = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(asyncio.shield(condition), timeout=90)
    finally:
        worker.request_stop()
    return await asyncio.wait_for(task, timeout=60)
