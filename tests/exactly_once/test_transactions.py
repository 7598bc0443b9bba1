"""The per-partition transactions' bookkeeping (worker.kafka.transactions), on fake producers
that fence like a broker (tests/support/fake_transactions.py)."""

from __future__ import annotations

import asyncio
import contextvars

import pytest
from aiokafka import TopicPartition
from aiokafka.errors import ProducerFenced

from tests.support.fake_transactions import Broker, member, producer, write
from worker.kafka.transactions import (
    INPUT_OFFSET,
    INPUT_PARTITION,
    PartitionTransactions,
    TransactionFailed,
    transactional_id,
    writing_for,
)
from worker.observability.metrics import Metrics


def test_transactional_ids_are_one_per_input_partition_and_the_same_for_every_member() -> None:
    ids = {transactional_id("g", "docs", p) for p in range(4)}
    assert len(ids) == 4
    assert transactional_id("g", "docs", 2) == transactional_id("g", "docs", 2)
    assert transactional_id("g", "docs", 2) != transactional_id("h", "docs", 2)
    assert transactional_id("g", "docs", 2) != transactional_id("g", "other", 2)


async def test_writes_go_to_their_partitions_transaction_and_commit_with_its_offset() -> None:
    broker = Broker()
    txns = member(broker)
    await txns.open([0, 1])
    assert producer(txns, 0).log == ["start", "begin"]  # started (fenced) before anything
    await write(txns, 0, "a")
    await write(txns, 1, "b")
    await write(txns, 0, "c")
    assert await txns.commit(0, 7)
    committed = broker.committed[transactional_id("g", "docs", 0)]
    assert committed == [(["chunks:a", "chunks:c"], {TopicPartition("docs", 0): 7})]
    assert producer(txns, 0).log[-3:] == ["offsets g", "commit", "begin"]  # the next is open
    assert transactional_id("g", "docs", 1) not in broker.committed  # its own, still open


async def test_an_idle_partition_commits_nothing_and_an_offset_alone_still_commits() -> None:
    broker = Broker()
    txns = member(broker)
    await txns.open([0])
    assert not await txns.commit(0, None)
    assert producer(txns, 0).log == ["start", "begin"]
    assert await txns.commit(0, 3)  # records that wrote nothing (skipped) still move the offset
    assert broker.committed[transactional_id("g", "docs", 0)] == [
        ([], {TopicPartition("docs", 0): 3})
    ]


async def test_a_write_outside_any_open_transaction_is_refused() -> None:
    txns = member(Broker())
    await txns.open([0])
    assert INPUT_PARTITION.get() is None
    with pytest.raises(TransactionFailed):
        await txns.send("chunks", value=b"x")  # no partition in the context
    with writing_for(1), pytest.raises(TransactionFailed):
        await txns.send("chunks", value=b"x")  # a partition not owned


async def test_the_next_owner_fences_a_zombie_which_can_then_neither_write_nor_commit() -> None:
    broker = Broker()
    zombie, owner = member(broker), member(broker)
    await zombie.open([0])
    await write(zombie, 0, "old")
    await owner.open([0])  # the partition moved: the new owner's start bumps the epoch
    with pytest.raises(ProducerFenced):
        await write(zombie, 0, "late")
    with pytest.raises(TransactionFailed):
        await zombie.commit(0, 10)
    assert transactional_id("g", "docs", 0) not in broker.committed
    await write(owner, 0, "new")
    assert await owner.commit(0, 5)
    assert broker.committed[transactional_id("g", "docs", 0)] == [
        (["chunks:new"], {TopicPartition("docs", 0): 5})
    ]


async def test_a_refused_write_poisons_its_transaction_and_no_retry_can_commit_it() -> None:
    broker = Broker()
    txns = member(broker)
    await txns.open([0, 1])
    producer(txns, 0).fail_next_send = RuntimeError("refused")
    with pytest.raises(RuntimeError):
        await write(txns, 0, "lost")
    producer(txns, 0).fail_next_send = None
    with pytest.raises(TransactionFailed):  # a retry of the document fails at once
        await write(txns, 0, "again")
    with pytest.raises(TransactionFailed):
        await txns.commit(0, 4)
    await write(txns, 1, "fine")  # the other partition's transaction is not affected
    assert await txns.commit(1, 1)
    await txns.abort(0)
    assert producer(txns, 0).log[-2:] == ["abort", "stop"]
    assert txns.partitions == {1}


async def test_metrics_count_commits_and_aborts_and_time_a_transaction_from_its_first_write() -> (
    None
):
    clock = [100.0]
    txns = member(Broker(), clock)
    await txns.open([0, 1])
    clock[0] = 105.0
    await write(txns, 0, "a")
    clock[0] = 107.5
    await txns.commit(0, 1)
    await write(txns, 1, "b")
    await txns.abort(1)
    await txns.abort(1)  # once
    m: Metrics = txns._metrics
    assert m.transactions_committed._value.get() == 1
    assert m.transactions_aborted._value.get() == 1
    assert m.transaction_seconds._sum.get() == pytest.approx(2.5)


async def test_close_stops_the_producers_of_partitions_let_go_and_open_starts_only_new_ones() -> (
    None
):
    broker = Broker()
    txns = member(broker)
    await txns.open([0, 1])
    first = producer(txns, 0)
    await txns.open([0, 1, 2])
    assert producer(txns, 0) is first
    assert first.log == ["start", "begin"]
    await txns.close([0, 2])
    assert txns.partitions == {1}
    assert first.log[-1] == "stop"
    await txns.stop()
    assert txns.partitions == set()


async def test_a_close_under_way_beside_the_shutdowns_stop_closes_each_producer_once() -> None:
    # A drop of lost partitions (a lapsed member rejoining) while the shutdown stops every
    # producer: the two closes overlap, each awaiting producers' stops (fault campaign, seed 7,
    # exactly-once: KeyError, exit 1).
    broker = Broker()
    txns = member(broker)
    await txns.open([0, 1, 2])
    producers = [producer(txns, p) for p in (0, 1, 2)]
    await asyncio.gather(txns.close([0, 1, 2]), txns.stop())
    assert txns.partitions == set()
    assert [p.log.count("stop") for p in producers] == [1, 1, 1]


# -- the cut: a commit closes a partition's transaction to the documents after it ----------


def document(
    txns: PartitionTransactions, partition: int, offset: int, value: str
) -> asyncio.Task[None]:
    """A document's task, as the consume loop starts it: it is let in, then writes."""

    async def run() -> None:
        await txns.admit()
        delivered = await txns.send("chunks", value=value.encode())
        await delivered

    context = contextvars.copy_context()
    context.run(INPUT_PARTITION.set, partition)
    context.run(INPUT_OFFSET.set, offset)
    return asyncio.create_task(run(), context=context)


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_a_commit_lets_in_documents_up_to_the_cut_and_holds_later_ones_for_the_next() -> None:
    broker = Broker()
    txns = member(broker)
    await txns.open([0])
    await document(txns, 0, 3, "three")
    assert txns.close_after(0) == 3  # the highest offset let in so far
    earlier, later = document(txns, 0, 2, "two"), document(txns, 0, 4, "four")
    await settle()
    assert earlier.done()  # offset 2 is below the cut
    assert not later.done()  # 4 waits for the next transaction
    assert await txns.commit(0, 4)
    txns.reopen(0)
    await later
    tid = transactional_id("g", "docs", 0)
    assert broker.committed[tid] == [
        (["chunks:three", "chunks:two"], {TopicPartition("docs", 0): 4})
    ]
    assert await txns.commit(0, 5)
    assert broker.committed[tid][1] == (["chunks:four"], {TopicPartition("docs", 0): 5})


async def test_a_commit_with_nothing_let_in_holds_every_document() -> None:
    txns = member(Broker())
    await txns.open([0])
    assert txns.close_after(0) == -1
    waiting = document(txns, 0, 0, "zero")
    await settle()
    assert not waiting.done()
    txns.reopen(0)  # put off, or done: either way the document comes in now
    await waiting
    assert producer(txns, 0).pending == ["chunks:zero"]


async def test_a_document_let_in_stays_in_while_a_commit_closes_behind_it() -> None:
    txns = member(Broker())
    await txns.open([0])

    async def two_writes() -> None:
        await txns.admit()
        await (await txns.send("chunks", value=b"first"))
        assert txns.close_after(0) == 5  # a commit starts between its writes
        await txns.admit()  # already in: no wait
        await (await txns.send("chunks", value=b"second"))

    context = contextvars.copy_context()
    context.run(INPUT_PARTITION.set, 0)
    context.run(INPUT_OFFSET.set, 5)
    await asyncio.wait_for(asyncio.create_task(two_writes(), context=context), 5)
    assert producer(txns, 0).pending == ["chunks:first", "chunks:second"]


async def test_a_waiting_document_fails_once_its_partitions_transaction_is_aborted() -> None:
    txns = member(Broker())
    await txns.open([0])
    await document(txns, 0, 1, "one")
    txns.close_after(0)
    waiting = document(txns, 0, 2, "two")
    await settle()
    await txns.abort(0)
    with pytest.raises(TransactionFailed):
        await waiting


async def test_a_write_of_a_document_not_let_in_is_refused() -> None:
    txns = member(Broker())
    await txns.open([0])

    async def write_without_admit() -> None:
        await txns.send("chunks", value=b"x")

    context = contextvars.copy_context()
    context.run(INPUT_PARTITION.set, 0)
    context.run(INPUT_OFFSET.set, 0)
    with pytest.raises(TransactionFailed, match="before admit"):
        await asyncio.create_task(write_without_admit(), context=context)
    assert producer(txns, 0).pending == []
