"""A changelog of document versions and deletes with its known end state, for the lifecycle
tests: what the stock sink must hold once the worker has read it all."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from tests.support import kafka_io
from worker.cli.sink import SinkStore, run_sink
from worker.config import Settings
from worker.pipeline import chunk_document_sync
from worker.wire.codec import EventEncoder
from worker.wire.events import DocumentEvent
from worker.wire.records import chunk_ids

WORDS = [
    "kafka",
    "partition",
    "offset",
    "broker",
    "replica",
    "leader",
    "segment",
    "compaction",
    "consumer",
    "group",
    "producer",
    "record",
    "batch",
    "header",
    "tombstone",
    "changelog",
    "retention",
    "topic",
    "commit",
    "fetch",
    "vector",
    "chunk",
    "index",
    "embedding",
    "sink",
    "upsert",
    "delete",
    "version",
    "document",
    "paragraph",
]

Record = tuple[bytes, bytes | None]


PARAMS = {"chunk_size": "160"}


def paragraph(rng: random.Random) -> str:
    sentences = []
    for _ in range(rng.randint(1, 4)):
        words = [rng.choice(WORDS) for _ in range(rng.randint(4, 14))]
        sentences.append(" ".join(words).capitalize() + ".")
    return " ".join(sentences)


@dataclass
class Doc:
    """A document as its producer sees it: paragraphs, versions sent, whether it exists."""

    id: str
    versioned: bool
    paragraphs: list[str]
    sent: list[tuple[int | None, str]] = field(default_factory=list)  # (version, text)
    live: bool = False


@dataclass
class Truth:
    """What the rules say each document is now: last write by offset, except an older integer
    version of a live document; a tombstone deletes."""

    texts: dict[str, str] = field(default_factory=dict)
    versions: dict[str, int | None] = field(default_factory=dict)

    def put(self, doc_id: str, version: int | None, text: str) -> None:
        current = self.versions.get(doc_id)
        live = doc_id in self.texts
        if live and current is not None and version is not None and version < current:
            return
        self.texts[doc_id] = text
        self.versions[doc_id] = version

    def delete(self, doc_id: str) -> None:
        self.texts.pop(doc_id, None)
        self.versions.pop(doc_id, None)


def changelog(count: int, documents: int, seed: int) -> tuple[list[Record], Truth]:
    """``count`` records over ``documents`` ids, and the truth they leave."""
    rng = random.Random(seed)
    encoder = EventEncoder("msgpack")
    docs = [Doc(f"doc-{n}", versioned=n % 2 == 0, paragraphs=[]) for n in range(documents)]
    truth = Truth()
    records: list[Record] = []

    def send(doc: Doc, version: int | None, text: str) -> None:
        event = DocumentEvent(id=doc.id, text=text, version=version)
        records.append((doc.id.encode(), encoder.encode(event)))
        doc.sent.append((version, text))
        truth.put(doc.id, version, text)

    while len(records) < count:
        doc = rng.choice(docs)
        if not doc.live:  # create (or create again after a delete)
            doc.paragraphs = [paragraph(rng) for _ in range(rng.randint(3, 12))]
            doc.live = True
        else:
            op = rng.choices(
                ["edit", "append", "truncate", "reorder", "delete", "resend"],
                weights=[5, 2, 1, 1, 1, 1],
            )[0]
            if op == "delete":
                records.append((doc.id.encode(), None))
                truth.delete(doc.id)
                doc.live = False
                continue
            if op == "resend" and doc.sent:
                version, text = rng.choice(doc.sent)
                event = DocumentEvent(id=doc.id, text=text, version=version)
                records.append((doc.id.encode(), encoder.encode(event)))
                truth.put(doc.id, version, text)
                continue
            if op == "edit":
                doc.paragraphs[rng.randrange(len(doc.paragraphs))] = paragraph(rng)
            elif op == "append":
                doc.paragraphs.append(paragraph(rng))
            elif op == "truncate" and len(doc.paragraphs) > 1:
                del doc.paragraphs[rng.randint(1, len(doc.paragraphs) - 1) :]
            elif op == "reorder" and len(doc.paragraphs) > 1:
                i, j = rng.sample(range(len(doc.paragraphs)), 2)
                doc.paragraphs[i], doc.paragraphs[j] = doc.paragraphs[j], doc.paragraphs[i]
        version = len(doc.sent) + 1 if doc.versioned else None
        send(doc, version, "\n\n".join(doc.paragraphs))
    return records, truth


def expected_chunks(truth: Truth, settings: Settings) -> dict[str, str]:
    """chunk id → text, by chunking each surviving document's last version offline, with the
    strategy built as the worker builds it."""
    built = kafka_io.build_as_worker(settings)
    out: dict[str, str] = {}
    for doc_id, text in truth.texts.items():
        chunks = chunk_document_sync(built, text, "text/plain", None)
        texts = [c.text for c in chunks]
        out.update(zip(chunk_ids(doc_id, built.fingerprint, texts), texts, strict=True))
    return out


async def produce(bootstrap: str, topic: str, records: list[Record]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        acks = [await producer.send(topic, key=key, value=value) for key, value in records]
        await asyncio.gather(*acks)
    finally:
        await producer.stop()


async def sink_contents(
    bootstrap: str, topic: str, db: Path, *, isolation_level: str = "read_uncommitted"
) -> dict[str, str]:
    """Apply the whole chunk topic with the reference sink; chunk id → text it holds
    (``read_committed``: only what committed transactions wrote)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level=isolation_level,
    )
    await consumer.start()
    store = SinkStore(db)
    try:
        partitions = [
            TopicPartition(topic, p) for p in await kafka_io.partitions_of(consumer, topic)
        ]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        await run_sink(consumer, store, idle_timeout_s=3.0, commit=False)
        return {row.key: row.text or "" for row in store.rows()}
    finally:
        await consumer.stop()
        store.close()
