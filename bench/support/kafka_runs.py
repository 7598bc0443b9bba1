"""TODO"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from unittest import mock

from tests.support.corpus import Document
from worker.chunking.types import ContentType
from worker.consuming.loop import ConsumeLoop
from worker.wire.codec import Encoding, EventEncoder
from worker.wire.events import DocumentEvent


def kind(doc: Document) -> ContentType:
    return "text/markdown" if doc.content_type == "text/markdown" else "text/plain"


REPO = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def clock_from_assignment() -> Iterator[list[tuple[float, float, float]]]:
    """While open, the first partition assignment of any `Worker` appends (process CPU,
    this thread's CPU, wall) to the list it yields: the clock starts before the worker's first
    fetch. Polling for the first consumed document instead started it late: a whole fetch (up
    to 500 documents) could be chunked before the poll noticed."""
    marks: list[tuple[float, float, float]] = []
    original = ConsumeLoop.on_assigned

    def on_assigned(loop: ConsumeLoop, assigned: set[Any]) -> None:
        if not marks:
            marks.append((time.process_time(), time.thread_time(), time.perf_counter()))
        original(loop, assigned)

    with mock.patch.object(ConsumeLoop, "on_assigned", on_assigned):
        yield marks


def repeated(docs: Sequence[Document], min_mb: float) -> list[Document]:
    """``docs`` repeated (copies renamed ``name~2``, ``name~3``, ...) to at least ``min_mb``."""
    out = list(docs)
    size = sum(len(d.text.encode()) for d in docs) / 1e6
    copy = 1
    while size and sum(len(d.text.encode()) for d in out) / 1e6 < min_mb:
        copy += 1
        out.extend(Document(f"{d.name}~{copy}", d.text, d.content_type) for d in docs)
    return out


async def produce_documents(
    bootstrap: str, topic: str, docs: Sequence[Document], encoding: Encoding = "msgpack"
) -> None:
    from aiokafka import AIOKafkaProducer

    encoder = EventEncoder(encoding)
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", max_request_size=16 * 1024 * 1024
    )
    await producer.start()
    try:
        acks = []
        for doc in docs:
            event = DocumentEvent(id=doc.name, text=doc.text, content_type=kind(doc))
            acks.append(
                await producer.send(
                    topic, encoder.encode(event), key=doc.name.encode(), headers=encoder.headers()
                )
            )
        await asyncio.gather(*acks)
    finally:
        await producer.stop()


def start_broker(run_dir: Path) -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = subprocess.run(
        [
            str(REPO / "deploy/kafka/local-kafka"),
            "start",
            "--port",
            str(port),
            "--dir",
            str(run_dir),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip().splitlines()[-1]
