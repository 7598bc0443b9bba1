"""Where the worker puts a document's chunk events, checked against a client nobody here wrote.

The worker computes each document's partition itself and appends its chunk events to record
batches of its own (worker/kafka/publisher.py). A consumer that co-partitions by document id (a
join, a per-document state store) relies on those events landing where any Kafka client
would put a record with that key: the Java producer's default partitioner, murmur2 of the key.
librdkafka implements it as ``partitioner=murmur2_random`` ("Java Producer compatible"; its
own default, ``consistent_random``, is CRC32 and places keys differently). So librdkafka
places a probe record per document id on a topic with the output topic's partition count,
and every chunk event must sit on its probe's partition, in index order, each document
complete, through small batches shared across documents and zstd compression.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.support import kafka_io
from tests.support.generated_docs import make_docs
from tests.support.kafka_io import run_worker_until
from tests.support.librdkafka import decode, read_topic
from worker.app import Worker
from worker.kafka.clients import create_topics

pytestmark = pytest.mark.kafka

PARTITIONS = 5


def probe_partitions(
    bootstrap: str, topic: str, keys: list[bytes], partitioner: str
) -> dict[bytes, int]:
    """The partition librdkafka chose for each key, from its delivery reports."""
    placed: dict[bytes, int] = {}

    def delivered(error: Any, message: Any) -> None:
        assert error is None, error
        placed[message.key()] = message.partition()

    producer = Producer(
        {"bootstrap.servers": bootstrap, "partitioner": partitioner, "enable.idempotence": True}
    )
    for key in keys:
        producer.produce(topic, value=b"probe", key=key, on_delivery=delivered)
    assert producer.flush(30) == 0
    return placed


async def test_chunk_events_land_where_the_java_partitioner_puts_their_document_id(
    kafka_bootstrap: str, topic_names: dict[str, str]
) -> None:
    settings = kafka_io.make_settings(
        kafka_bootstrap,
        topic_names,
        strategy_params="chunk_size=120",
        batch_size=2048,  # a few events per batch: documents span and share batches
        compression_type="zstd",
    )
    await kafka_io.create(settings, partitions=PARTITIONS)
    probe_topic = f"{settings.output_topic}.probe"
    await create_topics(settings, {probe_topic: PARTITIONS})
    docs = make_docs(80, seed=14, prefix="placed")
    keys = [d.id.encode() for d in docs]
    java = await asyncio.to_thread(
        probe_partitions, kafka_bootstrap, probe_topic, keys, "murmur2_random"
    )
    crc = await asyncio.to_thread(
        probe_partitions, kafka_bootstrap, probe_topic, keys, "consistent_random"
    )
    # The check can tell partitioners apart: librdkafka's own default disagrees for many keys.
    assert sum(java[k] != crc[k] for k in keys) > len(keys) // 4
    assert len(set(java.values())) == PARTITIONS

    await kafka_io.produce_raw(
        kafka_bootstrap, settings.input_topic, kafka_io.encode_documents(docs)
    )
    done = asyncio.ensure_future(
        kafka_io.wait_committed_to_end(kafka_bootstrap, settings.group_id, settings.input_topic)
    )
    assert await run_worker_until(Worker(settings), done) == 0

    indexes: dict[str, list[int]] = defaultdict(list)
    counts: dict[str, int] = {}
    messages = await asyncio.to_thread(read_topic, kafka_bootstrap, settings.output_topic)
    for message in sorted(messages, key=lambda m: (m.partition(), m.offset())):
        _, event, headers = decode(message)
        assert headers["content-type"] == b"application/msgpack"
        # Keyed by the chunk id (a sink's point id), placed where librdkafka's murmur2_random
        # puts the *document* id: one document's records in one partition, in order.
        assert message.key() == event["chunk_id"].encode()
        assert message.partition() == java[event["doc_id"].encode()], event["doc_id"]
        indexes[event["doc_id"]].append(event["index"])
        counts[event["doc_id"]] = event["count"]
    # Every document complete, once, in index order within its partition (no replays here).
    assert set(indexes) == {d.id for d in docs}
    for doc_id, seen in indexes.items():
        assert seen == list(range(counts[doc_id])), doc_id
    assert sum(counts.values()) > 4 * len(docs)  # several events per document
