"""Keep the current chunks of every document from chunkstream's chunk topic, with confluent-kafka
and the msgpack library: upsert by key, delete on a tombstone (docs/consuming.md).

    python recipes/chunk_map.py BOOTSTRAP [TOPIC [GROUP]]
"""

from __future__ import annotations

import argparse
from typing import Any

import msgpack
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Message, TopicPartition

DOC_ID_HEADER = "chunkstream-doc-id"  # on every tombstone: the document the chunk belonged to


class ChunkMap:
    """chunk id → chunk event of every current chunk, and the chunk ids of each document."""

    def __init__(self) -> None:
        self.chunks: dict[str, dict[str, Any]] = {}
        self.documents: dict[str, set[str]] = {}
        self.partition_of: dict[str, int | None] = {}  # all of a document's records are on one

    def apply(self, message: Message) -> None:
        chunk_id = (message.key() or b"").decode()
        value = message.value()
        if value is None:  # a tombstone: this chunk is gone from its document
            owner = dict(message.headers() or [])[DOC_ID_HEADER]
            doc_id = owner.decode() if isinstance(owner, bytes) else str(owner)
            self.chunks.pop(chunk_id, None)
            self.documents.get(doc_id, set()).discard(chunk_id)
            if not self.documents.get(doc_id):  # deleted, or every chunk of it replaced
                self.documents.pop(doc_id, None)
                self.partition_of.pop(doc_id, None)
            return
        event = msgpack.unpackb(value, timestamp=3)  # produced_at as a datetime
        self.chunks[chunk_id] = event  # an upsert: a chunk id is its text's, in its document
        self.documents.setdefault(event["doc_id"], set()).add(chunk_id)
        self.partition_of[event["doc_id"]] = message.partition()

    def document(self, doc_id: str) -> list[dict[str, Any]]:
        """The document's current chunks, in order."""
        events = (self.chunks[c] for c in self.documents.get(doc_id, ()))
        return sorted(events, key=lambda event: event["index"])

    def forget(self, partitions: set[int]) -> None:
        """Drop the documents of partitions this member no longer reads."""
        for doc_id in [d for d, p in self.partition_of.items() if p in partitions]:
            for chunk_id in self.documents.pop(doc_id, ()):
                del self.chunks[chunk_id]
            del self.partition_of[doc_id]


def chunk_consumer(bootstrap: str, topic: str, group: str, chunk_map: ChunkMap) -> Consumer:
    """A group member keeping ``chunk_map`` equal to the current chunks of its partitions. The
    map is in memory, so each partition it is given is read again from its start and no offset
    is ever committed: the group only shares the partitions out."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            # Only what committed transactions wrote (librdkafka's default, said here anyway).
            "isolation.level": "read_committed",
            # A rebalance moves only the partitions that change owner.
            "partition.assignment.strategy": "cooperative-sticky",
        }
    )

    def on_assign(consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for partition in partitions:
            partition.offset = OFFSET_BEGINNING
        consumer.incremental_assign(partitions)

    def on_revoke(consumer: Consumer, partitions: list[TopicPartition]) -> None:
        chunk_map.forget({partition.partition for partition in partitions})

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    return consumer


def poll(consumer: Consumer, chunk_map: ChunkMap, timeout_s: float = 1.0) -> bool:
    """Apply the next record, if one comes within ``timeout_s``; whether one did."""
    message = consumer.poll(timeout_s)
    if message is None:
        return False
    if message.error() is not None:
        raise KafkaException(message.error())
    chunk_map.apply(message)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bootstrap", help="host:port of a broker")
    parser.add_argument("topic", nargs="?", default="chunks")
    parser.add_argument("group", nargs="?", default="chunk-map")
    args = parser.parse_args()
    chunk_map = ChunkMap()
    consumer = chunk_consumer(args.bootstrap, args.topic, args.group, chunk_map)
    changed = False
    try:
        while True:
            if poll(consumer, chunk_map):
                changed = True
            elif changed:  # caught up: show what the map holds
                for doc_id in sorted(chunk_map.documents):
                    print(f"{doc_id}: {len(chunk_map.documents[doc_id])} chunks")
                print(f"({len(chunk_map.chunks)} chunks of {len(chunk_map.documents)} documents)")
                changed = False
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()


if __name__ == "__main__":
    main()
