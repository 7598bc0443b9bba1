"""Reading a topic with librdkafka (confluent-kafka): the interop tests' independent reader."""

from __future__ import annotations

import base64
import json
from typing import Any

import msgpack
from confluent_kafka import Consumer, TopicPartition


def read_topic(bootstrap: str, topic: str, *, isolation_level: str | None = None) -> list[Any]:
    """Every record of ``topic``, read with librdkafka up to the end offsets (librdkafka's own
    ``isolation.level`` unless one is given; with ``read_committed``, no transaction may be open
    then). Transaction markers take offsets that no message has, so the end is told by the
    consumer's position, not by the last message's offset."""
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": f"reader-{topic}",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
    if isolation_level is not None:
        config["isolation.level"] = isolation_level
    consumer = Consumer(config)
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p))[1] for p in partitions}
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        records: list[Any] = []
        for _ in range(600):
            positions = consumer.position([TopicPartition(topic, p) for p in partitions])
            # Before its first fetch a partition's position is unset (negative).
            if all(ends[tp.partition] == 0 or tp.offset >= ends[tp.partition] for tp in positions):
                return records
            for message in consumer.consume(num_messages=1000, timeout=0.5):
                assert message.error() is None, message.error()
                records.append(message)
        raise TimeoutError(f"could not read {topic} to its end {ends}")
    finally:
        consumer.close()


def read_committed(bootstrap: str, topic: str) -> list[Any]:
    """:func:`read_topic` as a ``read_committed`` consumer (librdkafka's default, set anyway)."""
    return read_topic(bootstrap, topic, isolation_level="read_committed")


def decode(message: Any) -> tuple[dict[str, Any], dict[str, Any], dict[str, bytes]]:
    """(event as decoded, event in its JSON form, headers) of one output record."""
    headers = dict(message.headers() or [])
    if headers["content-type"] == b"application/msgpack":
        # timestamp=0: the extension stays a msgpack.Timestamp, so the test can see it.
        raw = msgpack.unpackb(message.value(), raw=False, timestamp=0)
        return raw, as_json_form(raw), headers
    assert headers["content-type"] == b"application/json"
    event = json.loads(message.value())
    return event, event, headers


def as_json_form(value: Any) -> Any:
    """The msgpack contract, applied: timestamp extension → RFC 3339, bin → base64."""
    if isinstance(value, msgpack.Timestamp):
        return value.to_datetime().isoformat().replace("+00:00", "Z")
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, dict):
        return {k: as_json_form(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_json_form(v) for v in value]
    return value
