"""The member's standing in its group and the fence it puts on its own writes
(worker.kafka.membership): the pure rule with numbers, then on the real broker a member frozen
past its session timeout, as a SIGSTOP freezes it (here: the event loop blocked), whose queued
record must not reach Kafka after it runs again, and whose client then reports it gone."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition

from tests.support import kafka_io
from worker.kafka.membership import Membership, Standing, discard_queued, hold_sends

SESSION_MS = 6000


def test_a_standing_is_vouched_for_a_session_from_the_send_of_its_last_proof() -> None:
    standing = Standing(session_timeout_s=10.0)
    assert not standing.vouched(0.0)  # nothing proven yet
    standing.proven(100.0)
    assert standing.vouched(109.9)
    assert not standing.vouched(110.0)  # the coordinator may have expired it by now
    standing.proven(99.0)  # an older proof answered late proves nothing newer
    assert not standing.vouched(110.0)
    standing.proven(108.0)
    assert standing.vouched(117.0)


def test_membership_is_gone_when_the_client_resets_its_generation() -> None:
    class Coordinator:
        generation = 5
        member_id = "m-1"

        async def _do_heartbeat(self) -> bool:
            return True

        def request_rejoin(self) -> None:
            raise AssertionError("no lapse here")

    class Consumer:
        _coordinator = Coordinator()

    now = [0.0]
    membership = Membership(10_000, clock=lambda: now[0])
    membership.attach(Consumer())
    membership.joined()
    assert membership.vouched()
    assert not membership.gone
    Consumer._coordinator.generation = -1  # aiokafka's reset after UNKNOWN_MEMBER_ID
    assert membership.gone
    assert not membership.may_send()
    membership.release()
    assert membership.may_send()  # after the worker let go of everything (shutdown)


def test_a_gap_of_a_session_between_proofs_is_a_lapse_until_the_next_join() -> None:
    standing = Standing(session_timeout_s=6.0)
    standing.joined(0.0)
    standing.proven(5.0)
    assert standing.vouched(10.0)
    # Frozen (or cut off) for longer than a session: the coordinator may have expired the
    # member meanwhile, so an answer that comes afterwards does not vouch for it again.
    standing.proven(12.0)
    assert standing.lapsed
    assert not standing.vouched(12.5)
    standing.proven(13.0)
    assert not standing.vouched(13.5)
    standing.joined(20.0)  # a fresh assignment
    assert not standing.lapsed
    assert standing.vouched(20.5)


async def test_a_lapsed_member_holds_its_writes_and_rejoins_once() -> None:
    rejoins: list[float] = []
    now = [0.0]

    class Coordinator:
        generation = 5
        member_id = "m-1"

        async def _do_heartbeat(self) -> bool:
            now[0] += 0.01  # the round trip
            return True  # answered, as a coordinator that restarted may answer

        def request_rejoin(self) -> None:
            rejoins.append(now[0])

    class Consumer:
        _coordinator = Coordinator()

    membership = Membership(6_000, clock=lambda: now[0])
    membership.attach(Consumer())
    membership.joined()
    await Consumer._coordinator._do_heartbeat()
    assert membership.may_send()
    now[0] = 30.0  # paused past the session (a SIGSTOP while the broker restarted)
    await Consumer._coordinator._do_heartbeat()
    assert not membership.may_send()
    assert rejoins == [30.01]
    now[0] = 31.0
    await Consumer._coordinator._do_heartbeat()
    assert not membership.may_send()
    assert rejoins == [30.01]  # asked once; the join that follows ends the lapse
    membership.joined()
    assert membership.may_send()


async def _join(consumer: AIOKafkaConsumer) -> None:
    for _ in range(200):
        await consumer.getmany(timeout_ms=100)
        if consumer.assignment():
            return
    raise TimeoutError("never assigned")


async def test_a_discarded_producer_fails_the_batches_that_come_back_to_its_queue() -> None:
    """The client's own queue, worked as its sender works it (no broker: nothing is sent). A
    batch on the wire when the partitions were lost, refused because the broker went away, is
    queued again for a retry after the discard; it must fail then, not go out once the member
    has rejoined. And a retried batch discarded from the queue settles without the client's
    bookkeeping raising in a callback (which asyncio logs as an error)."""
    loop = asyncio.get_running_loop()
    callback_errors: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _, context: callback_errors.append(context))
    producer = AIOKafkaProducer(bootstrap_servers="127.0.0.1:9", enable_idempotence=True)
    producer._txn_manager.set_pid_and_epoch(7, 0)  # as the sender's first step does
    queue = producer._message_accumulator
    tp = TopicPartition("chunks", 0)
    try:

        def batch_of(value: bytes) -> object:
            builder = producer.create_batch()
            builder.append(timestamp=None, key=b"k", value=value)
            return builder

        # The sender takes both (both get their sequence numbers); the second is refused and
        # queued again for a retry, the first is still on the wire.
        on_the_wire = await queue.add_batch(batch_of(b"on the wire"), tp, timeout=1)
        taken = queue._pop_batch(tp)
        retried = await queue.add_batch(batch_of(b"retried"), tp, timeout=1)
        queue.reenqueue(queue._pop_batch(tp))

        discard_queued(producer, RuntimeError("lost"))
        with pytest.raises(RuntimeError):
            await retried
        assert not on_the_wire.done()

        queue.reenqueue(taken)  # its request fails after the discard: queued again
        nodes, _ = queue.drain_by_nodes(ignore_nodes=set())  # the sender looks again
        assert not nodes
        await asyncio.sleep(0)  # the client's own callbacks on those futures run
        assert on_the_wire.done()
        assert isinstance(on_the_wire.exception(), RuntimeError)
        assert not queue._batches
        assert not queue._pending_batches
        assert callback_errors == []
    finally:
        loop.set_exception_handler(None)
        queue.fail_all(RuntimeError("end of the test"))  # nothing left for stop() to flush
        await producer.stop()


@pytest.mark.kafka
@pytest.mark.parametrize("fenced", [True, False])
async def test_a_record_queued_by_a_member_frozen_past_its_session_is_not_sent(
    kafka_bootstrap: str, topic_names: dict[str, str], fenced: bool
) -> None:
    settings = kafka_io.make_settings(kafka_bootstrap, topic_names)
    await kafka_io.create(settings, partitions=1)
    consumer = AIOKafkaConsumer(
        settings.input_topic,
        bootstrap_servers=kafka_bootstrap,
        group_id=f"membership-{uuid.uuid4().hex[:8]}",
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=1000,
        enable_auto_commit=False,
    )
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, linger_ms=50)
    await consumer.start()
    await producer.start()
    membership = Membership(SESSION_MS)
    membership.attach(consumer)
    if fenced:
        hold_sends(producer, membership.may_send)
    try:
        await _join(consumer)
        membership.joined()
        sent = await producer.send(settings.output_topic, b"before the freeze")
        await sent  # the fence lets a member in good standing send

        late = await producer.send(settings.output_topic, b"queued at the freeze")
        # Frozen on purpose, the whole event loop: no task runs, as under SIGSTOP.
        time.sleep(SESSION_MS / 1000 + 2.0)  # noqa: ASYNC251
        assert not membership.vouched()  # known the moment it runs again
        for _ in range(100):  # the next heartbeat tells the client it was expelled
            if membership.gone:
                break
            await asyncio.sleep(0.1)
        assert membership.gone
        if fenced:
            assert not late.done()
            discard_queued(producer, RuntimeError("lost"))
            with pytest.raises(RuntimeError):
                await late
        else:
            await late  # without the fence it lands, behind whatever the new owner wrote
        ends = await kafka_io.end_offsets(kafka_bootstrap, settings.output_topic)
        assert sum(ends.values()) == (1 if fenced else 2)
    finally:
        await producer.stop()
        await consumer.stop()
