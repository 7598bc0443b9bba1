"""The worker's producer (worker.kafka.producers) on a real broker that goes away: a batch sent
once and queued again for a retry carries its idempotence sequence numbers, so discarding it
(the member's partitions were lost) must not leave the partition's later batches refused."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from tests.support import kafka_io
from tests.support.librdkafka import read_topic
from tests.support.private_broker import PrivateBroker
from worker.consuming.commits import PartitionsLost
from worker.kafka.producers import RenewingProducer

pytestmark = pytest.mark.kafka


@pytest.mark.timeout(300)
@pytest.mark.parametrize("held", [True, False], ids=["held", "retrying"])
async def test_a_discard_of_retried_batches_leaves_no_sequence_gap(
    tmp_path: Path, topic_names: dict[str, str], held: bool
) -> None:
    """``held``: the member knew it was expelled before the discard, so the retry waits in the
    producer's queue. Otherwise the discard finds it between two attempts against the dead
    broker (taken from the queue, waiting out its back-off), and it comes back to the queue
    after the discard: it must fail then, not land once the broker is back."""
    broker = PrivateBroker(tmp_path / "broker")
    broker.start()
    try:
        settings = kafka_io.make_settings(broker.bootstrap, topic_names)
        await kafka_io.create(settings, partitions=1)
        topic = settings.output_topic
        gate = [True]
        producer = RenewingProducer(settings, lambda: gate[0])
        await producer.start()
        try:
            await (await producer.send(topic, value=b"before", key=b"a"))
            pid = broker.pid()
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            for _ in range(600):  # until the JVM is gone
                if broker.pid() is None:
                    break
                await asyncio.sleep(0.1)
            # Sent once (its sequence number taken), refused (the broker is gone), queued
            # again for a retry: then the member finds itself expelled and holds its writes.
            lost = await producer.send(topic, value=b"lost", key=b"b")
            await asyncio.sleep(2.0)
            if held:
                gate[0] = False
                await asyncio.sleep(0.5)
            producer.discard(PartitionsLost("partitions lost: not sent"))
            with pytest.raises(PartitionsLost):
                # Bounded so that a regression fails instead of hanging: a retry comes back
                # to the queue within the client's back-off (100 ms).
                async with asyncio.timeout(60):
                    await lost
            await asyncio.to_thread(broker.start)
            gate[0] = True  # rejoined
            async with asyncio.timeout(120):
                await (await producer.send(topic, value=b"after", key=b"c"))
        finally:
            await producer.stop()
        values = [m.value() for m in await asyncio.to_thread(read_topic, broker.bootstrap, topic)]
        assert values == [b"before", b"after"]
    finally:
        broker.stop()
