"""Publishing chunk events and dead letters, and waiting for the broker's acknowledgements."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from aiokafka import AIOKafkaProducer
from aiokafka.errors import MessageSizeTooLargeError, RecordTooLargeError
from aiokafka.partitioner import DefaultPartitioner

from worker.codec import EventEncoder, Headers
from worker.errors import OutputRecordTooLarge
from worker.events import ChunkEvent, DeadLetterEvent

# Record overhead beyond key and value (batch header, headers, varints): leave room for it
# when checking a value against max_record_bytes ourselves.
_RECORD_OVERHEAD = 1024
# Kafka's default keyed partitioning (murmur2 of the key), as every client computes it.
_PARTITIONER = DefaultPartitioner()


class Publisher:
    def __init__(
        self,
        producer: AIOKafkaProducer,
        encoder: EventEncoder,
        *,
        output_topic: str,
        dlq_topic: str,
        max_record_bytes: int,
    ) -> None:
        self._producer = producer
        self._encoder = encoder
        self._headers = encoder.headers()
        self.output_topic = output_topic
        self.dlq_topic = dlq_topic
        self.max_value_bytes = max_record_bytes - _RECORD_OVERHEAD

    async def publish_chunks(
        self, doc_id: str, events: Sequence[ChunkEvent], headers: Headers = ()
    ) -> int:
        """Send a document's chunk events in index order (one key → one partition, and the
        idempotent producer keeps order) and return once the broker acknowledged all of them.
        ``headers`` (trace context, forwarded input headers) go on every record beside the
        content type. Returns the bytes published."""
        key = doc_id.encode()
        values = [self._encoder.encode(event) for event in events]
        for index, value in enumerate(values):
            if len(value) + len(key) > self.max_value_bytes:
                raise OutputRecordTooLarge(
                    f"chunk {index} encodes to {len(value)} bytes, above the record limit "
                    f"{self.max_value_bytes} (raise CHUNKSTREAM_MAX_RECORD_BYTES or lower the "
                    "chunk size)"
                )
        # The partition is computed once per document (same key → same partition a keyed
        # send would choose): the client's per-record partitioner was a measurable share of
        # publishing cost. Whole-batch sends were tried and dropped: the client lets only one
        # such batch per partition wait at a time, so concurrent documents time out.
        partition = await self._partition_for(key)
        record_headers = [*self._headers, *headers] if headers else self._headers
        acks = []
        try:
            for value in values:
                acks.append(
                    await self._producer.send(
                        self.output_topic,
                        value=value,
                        key=key,
                        headers=record_headers,
                        partition=partition,
                    )
                )
            await asyncio.gather(*acks)
        except (MessageSizeTooLargeError, RecordTooLargeError) as exc:
            # The topic's own max.message.bytes is below ours: no retry can succeed.
            for ack in acks:
                if not ack.done():
                    ack.cancel()
            raise OutputRecordTooLarge(f"the output topic refused a chunk event: {exc}") from None
        return sum(len(v) for v in values)

    async def _partition_for(self, key: bytes) -> int:
        partitions = sorted(await self._producer.partitions_for(self.output_topic))
        return int(_PARTITIONER(key, partitions, partitions))

    async def publish_dead_letter(self, event: DeadLetterEvent, headers: Headers = ()) -> None:
        value = self._encoder.encode(event)
        ack = await self._producer.send(
            self.dlq_topic, value=value, key=event.key, headers=[*self._headers, *headers]
        )
        await ack
