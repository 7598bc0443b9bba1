"""The worker among software nobody here wrote: librdkafka (confluent-kafka) produces documents
in JSON and msgpack with every codec, the real worker consumes them through the real broker,
and confluent-kafka reads the chunk events and dead letters back; the `msgpack` library (not
msgspec) decodes them and the stock `jsonschema` validator checks every one against
`schemas/`, holding the msgpack contract (timestamp extension for date-times, bin for bytes).
The W3C trace context continues across the worker."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import jsonschema
import msgpack
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.support import kafka_io
from tests.support.generated_docs import WORDS
from tests.support.kafka_io import run_worker_until
from tests.support.librdkafka import decode, read_topic
from worker.app import Worker

pytestmark = pytest.mark.kafka

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
CODECS = ("gzip", "snappy", "lz4", "zstd")


def schema_validator(name: str) -> jsonschema.protocols.Validator:
    schema = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    # rfc3339-validator is installed, so the stock checker really checks "date-time".
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def documents(n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        sentences = [
            " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 20))).capitalize() + "."
            for _ in range(rng.randint(1, 30))
        ]
        docs.append(
            {"id": f"interop-{seed}-{i}", "text": " ".join(sentences), "metadata": {"n": i}}
        )
    return docs


def trace_id(seed: int, i: int) -> str:
    return f"{seed:08x}{i:08x}" + "ab" * 8


def produce(bootstrap: str, topic: str, codec: str, docs: list[dict[str, Any]], seed: int) -> None:
    """Half JSON (stdlib), half msgpack (the msgpack library); some without a content-type
    header (the worker sniffs); each with a traceparent, a tracestate and two other headers."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": codec,
            "linger.ms": 20,
            "enable.idempotence": True,
        }
    )
    for i, doc in enumerate(docs):
        as_json = i % 2 == 0
        value = json.dumps(doc).encode() if as_json else msgpack.packb(doc)
        headers: list[tuple[str, str | bytes | None]] = [
            ("traceparent", f"00-{trace_id(seed, i)}-00f067aa0ba902b7-01".encode()),
            ("tracestate", f"vendor=doc{i}".encode()),
            ("tenant", b"acme"),
            ("x-secret", b"not for the output"),
        ]
        if i % 3:
            headers.append(
                ("content-type", b"application/json" if as_json else b"application/msgpack")
            )
        producer.produce(topic, value=value, key=doc["id"].encode(), headers=headers)
    # Bad input, also compressed: each must become one dead letter.
    producer.produce(
        topic,
        value=b'{"id": "broken", "text": ',
        key=b"broken",
        headers=[("traceparent", f"00-{trace_id(seed, 999)}-00f067aa0ba902b7-00".encode())],
    )
    producer.produce(topic, value=msgpack.packb({"text": "no id"}), key=b"no-id")
    assert producer.flush(30) == 0, "librdkafka could not deliver every document"


@pytest.mark.parametrize("encoding", ["msgpack", "json"])
async def test_librdkafka_in_every_codec_worker_in_between_librdkafka_out(
    kafka_bootstrap: str, topic_names: dict[str, str], encoding: str
) -> None:
    settings = kafka_io.make_settings(
        kafka_bootstrap,
        topic_names,
        encoding=encoding,
        strategy_params="chunk_size=200",
        forward_headers="tenant",
    )
    await kafka_io.create(settings)
    sent: dict[str, tuple[dict[str, Any], str]] = {}  # id -> (document, trace id)
    for seed, codec in enumerate(CODECS):
        docs = documents(12, seed)
        await asyncio.to_thread(produce, kafka_bootstrap, settings.input_topic, codec, docs, seed)
        sent.update({d["id"]: (d, trace_id(seed, i)) for i, d in enumerate(docs)})

    done = asyncio.ensure_future(
        kafka_io.wait_committed_to_end(kafka_bootstrap, settings.group_id, settings.input_topic)
    )
    assert await run_worker_until(Worker(settings), done) == 0

    chunk_schema = schema_validator("chunk-event.schema.json")
    dead_schema = schema_validator("dead-letter-event.schema.json")
    by_doc: dict[str, dict[int, dict[str, Any]]] = {}
    spans: dict[str, set[str]] = {}
    for message in await asyncio.to_thread(read_topic, kafka_bootstrap, settings.output_topic):
        raw, event, headers = decode(message)
        chunk_schema.validate(event)
        if encoding == "msgpack":
            assert isinstance(raw["produced_at"], msgpack.Timestamp)
        doc, tid = sent[event["doc_id"]]
        by_doc.setdefault(event["doc_id"], {})[event["index"]] = event
        assert event["text"] == doc["text"][event["start_index"] : event["end_index"]]
        assert event["metadata"]["n"] == doc["metadata"]["n"]
        version, out_trace, span, flags = headers["traceparent"].decode().split("-")
        assert (version, out_trace, flags) == ("00", tid, "01")
        assert span not in ("00f067aa0ba902b7", "0" * 16)
        spans.setdefault(event["doc_id"], set()).add(span)
        assert headers["tracestate"] == f"vendor=doc{event['metadata']['n']}".encode()
        assert headers["tenant"] == b"acme"
        assert "x-secret" not in headers
    # Nothing lost: every document, every chunk index, one worker span per document.
    assert set(by_doc) == set(sent)
    for doc_id, chunks in by_doc.items():
        assert sorted(chunks) == list(range(next(iter(chunks.values()))["count"])), doc_id
        assert len(spans[doc_id]) == 1

    dead = await asyncio.to_thread(read_topic, kafka_bootstrap, settings.dlq_topic)
    kinds = []
    broken_traces: set[str] = set()
    for message in dead:
        raw, event, headers = decode(message)
        dead_schema.validate(event)
        kinds.append((message.key(), event["error_kind"]))
        if encoding == "msgpack":
            assert isinstance(raw["failed_at"], msgpack.Timestamp)
            assert isinstance(raw["value"], bytes)
        if message.key() == b"broken":  # the dead letter continues the document's trace
            version, out_trace, _, flags = headers["traceparent"].decode().split("-")
            assert (version, flags) == ("00", "00")
            broken_traces.add(out_trace)
            assert "tracestate" not in headers
        else:
            assert "traceparent" not in headers
    assert broken_traces == {trace_id(seed, 999) for seed in range(len(CODECS))}
    assert sorted(kinds) == sorted(
        [(b"broken", "undecodable"), (b"no-id", "schema_violation")] * len(CODECS)
    )

    # Committed offsets at the end, as librdkafka reads them for the worker's group.
    reader = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": settings.group_id})
    try:
        partitions = [TopicPartition(settings.input_topic, p) for p in range(3)]
        committed = await asyncio.to_thread(reader.committed, partitions, 10)
        for tp in committed:
            _, high = reader.get_watermark_offsets(tp)
            assert tp.offset == high, f"partition {tp.partition}: {tp.offset} of {high}"
    finally:
        reader.close()
