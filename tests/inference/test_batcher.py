"""The asyncio batcher against a fake backend: ordering, deadlines, failures, cancellation."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Sequence

import numpy as np
import pytest
from numpy.typing import NDArray

from tests.support.embedding import embed_batch
from worker.inference.batcher import MEASURE_IN_THREAD_OVER, Batcher
from worker.models.backend import EmbeddingBackend

DIM = 3


class FakeBackend:
    """Texts look like ``"<id> word word ..."``; the embedding's first value is the id.

    Records every batch; fails any batch holding a text with "boom"; can be held mid-batch.
    """

    def __init__(self, *, delay: float = 0.0) -> None:
        self.batches: list[list[str]] = []
        self.delay = delay
        self.entered = threading.Event()
        self.release = threading.Event()
        self.release.set()

    @property
    def dimension(self) -> int:
        return DIM

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        return [len(t.split()) + 2 for t in texts]

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.batches.append(list(texts))
        self.entered.set()
        self.release.wait(timeout=10)
        if self.delay:
            time.sleep(self.delay)
        if any("boom" in t for t in texts):
            raise RuntimeError("inference exploded")
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        out[:, 0] = [float(t.split()[0]) for t in texts]
        out[:, 1] = [len(t.split()) for t in texts]
        return out


def ids(vectors: NDArray[np.float32]) -> list[int]:
    return [int(v) for v in vectors[:, 0]]


def texts(first: int, count: int, words: int = 3) -> list[str]:
    return [f"{i} " + " ".join(["w"] * (i % words)) for i in range(first, first + count)]


def test_fake_backend_satisfies_the_protocol() -> None:
    assert isinstance(FakeBackend(), EmbeddingBackend)


async def test_concurrent_requests_get_their_own_rows_in_order() -> None:
    backend = FakeBackend()
    async with Batcher(backend, max_batch_tokens=64, max_batch_size=16, max_wait_ms=5) as b:
        requests = [texts(100 * r, 7 + r) for r in range(6)]
        results = await asyncio.gather(*(b.submit(r) for r in requests))
    for request, result in zip(requests, results, strict=True):
        assert result.dtype == np.float32
        assert result.shape == (len(request), DIM)
        assert ids(result) == [int(t.split()[0]) for t in request]
    # Packed across requests: fewer batches than requests × texts, none over the limits.
    assert sum(len(batch) for batch in backend.batches) == sum(map(len, requests))
    assert all(len(batch) <= 16 for batch in backend.batches)
    assert all(max(backend.token_lengths(x)) * len(x) <= 64 for x in backend.batches)
    assert len(backend.batches) < len(requests) * 2


async def test_lone_request_is_flushed_at_its_deadline() -> None:
    backend = FakeBackend()
    async with Batcher(backend, max_batch_tokens=10_000, max_wait_ms=100) as b:
        started = time.perf_counter()
        result = await b.submit(["1 a"])
        waited = time.perf_counter() - started
    assert ids(result) == [1]
    assert waited >= 0.09  # it did wait for company...
    assert waited < 5.0  # ...but not for ever


async def test_full_batch_does_not_wait_for_the_deadline() -> None:
    backend = FakeBackend()
    async with Batcher(backend, max_batch_tokens=10_000, max_batch_size=4, max_wait_ms=60_000) as b:
        result = await asyncio.wait_for(b.submit(texts(0, 8)), timeout=10)
    assert ids(result) == list(range(8))
    assert [len(batch) for batch in backend.batches] == [4, 4]


async def test_inference_error_fails_only_the_requests_in_that_batch() -> None:
    backend = FakeBackend()
    # One text per batch, so the failing text cannot take the good request down with it.
    async with Batcher(backend, max_batch_size=1, max_wait_ms=1) as b:
        good, bad = await asyncio.gather(
            b.submit(["1 a", "2 b"]), b.submit(["3 c", "4 boom"]), return_exceptions=True
        )
        after = await b.submit(["5 d"])
    assert isinstance(good, np.ndarray)
    assert ids(good) == [1, 2]
    assert isinstance(bad, RuntimeError)
    assert "exploded" in str(bad)
    assert ids(after) == [5]
    assert b.stats.failed_batches == 1


async def test_cancelled_request_leaves_the_queue_and_spares_the_others() -> None:
    backend = FakeBackend()
    async with Batcher(backend, max_batch_tokens=10_000, max_wait_ms=200) as b:
        doomed = asyncio.create_task(b.submit(["1 doomed", "2 doomed"]))
        await asyncio.sleep(0.01)
        assert b.stats.queue_texts == 2
        doomed.cancel()
        with pytest.raises(asyncio.CancelledError):
            await doomed
        assert b.stats.queue_texts == 0
        survivor = await b.submit(["3 fine"])
    assert ids(survivor) == [3]
    assert backend.batches == [["3 fine"]]
    assert b.stats.cancelled_texts == 2


async def test_cancelling_during_inference_does_not_poison_the_batch() -> None:
    backend = FakeBackend()
    backend.release.clear()
    async with Batcher(backend, max_batch_tokens=10_000, max_wait_ms=1) as b:
        first = asyncio.create_task(b.submit(["1 a"]))
        second = asyncio.create_task(b.submit(["2 b"]))
        await asyncio.to_thread(backend.entered.wait, 5)
        first.cancel()
        backend.release.set()
        result = await second
        with pytest.raises(asyncio.CancelledError):
            await first
    assert ids(result) == [2]
    assert backend.batches == [["1 a", "2 b"]]


async def test_event_loop_keeps_running_during_inference() -> None:
    backend = FakeBackend(delay=0.3)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    async with Batcher(backend, max_wait_ms=1) as b:
        await b.submit(["1 a"])
    task.cancel()
    assert ticks >= 10  # a blocked loop would have ticked at most once or twice


class SlowMeasuringBackend(FakeBackend):
    """Tokenising takes ``measure_seconds`` of blocking work, as a big document really does."""

    def __init__(self, measure_seconds: float) -> None:
        super().__init__()
        self.measure_seconds = measure_seconds
        self.measuring = threading.Event()
        self.measured = threading.Event()

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        self.measuring.set()
        time.sleep(self.measure_seconds)
        self.measured.set()
        return super().token_lengths(texts)


async def loop_lateness_while(work: asyncio.Task[object], period: float = 0.01) -> float:
    """The worst delay of a ``period`` tick beyond its due time while ``work`` runs."""
    worst = 0.0
    while not work.done():
        due = time.perf_counter() + period
        await asyncio.sleep(period)
        worst = max(worst, time.perf_counter() - due)
    return worst


async def test_a_large_request_is_measured_off_the_event_loop() -> None:
    backend = SlowMeasuringBackend(measure_seconds=0.5)
    large = texts(0, MEASURE_IN_THREAD_OVER + 1)
    async with Batcher(backend, max_wait_ms=1) as b:
        work = asyncio.create_task(b.submit(large))
        lateness = await loop_lateness_while(work)
        result = await work
    assert ids(result) == list(range(len(large)))
    # Measured inline, the loop would have stalled for the whole 0.5 s.
    assert lateness < 0.25


async def test_cancelling_a_request_being_measured_queues_nothing() -> None:
    backend = SlowMeasuringBackend(measure_seconds=0.2)
    async with Batcher(backend, max_wait_ms=1) as b:
        doomed = asyncio.create_task(b.submit(texts(0, MEASURE_IN_THREAD_OVER + 1)))
        await asyncio.to_thread(backend.measuring.wait, 5)
        doomed.cancel()
        with pytest.raises(asyncio.CancelledError):
            await doomed
        await asyncio.to_thread(backend.measured.wait, 5)
        await asyncio.sleep(0.01)
        assert b.stats.queue_texts == 0
        backend.measure_seconds = 0.0
        survivor = await b.submit(["7 fine"])
    assert ids(survivor) == [7]
    assert backend.batches == [["7 fine"]]


async def test_exit_waits_for_a_request_still_being_measured() -> None:
    backend = SlowMeasuringBackend(measure_seconds=0.2)
    large = texts(0, MEASURE_IN_THREAD_OVER + 1)
    async with Batcher(backend, max_wait_ms=1) as b:
        work = asyncio.create_task(b.submit(large))
        await asyncio.to_thread(backend.measuring.wait, 5)
    # The context exited (drained) while the request was on the measuring thread.
    assert ids(await work) == list(range(len(large)))


async def test_watermark_signals_over_and_back_under() -> None:
    backend = FakeBackend()
    changes: list[bool] = []
    async with Batcher(
        backend,
        max_batch_tokens=10_000,
        max_wait_ms=100,
        queue_high_tokens=20,
        queue_low_tokens=5,
        on_watermark=changes.append,
    ) as b:
        pending = asyncio.create_task(b.submit(texts(0, 8)))  # 8 texts of 2-4 tokens
        await asyncio.sleep(0.01)
        assert b.over_high_watermark
        assert b.stats.queue_tokens >= 20
        for _ in range(500):  # the queue drains under its low watermark
            if not b.over_high_watermark:
                break
            await asyncio.sleep(0.01)
        assert not b.over_high_watermark
        await pending
    assert changes == [True, False]
    assert b.stats.high_watermark_hits == 1


async def test_stats_count_real_and_padded_tokens() -> None:
    backend = FakeBackend()
    async with Batcher(backend, max_batch_tokens=10_000, max_wait_ms=1) as b:
        await b.submit(["1", "2 a a a"])  # 3 and 6 tokens, padded to 6 each
    stats = b.stats
    assert (stats.batches, stats.texts) == (1, 2)
    assert (stats.real_tokens, stats.padded_tokens) == (9, 12)
    assert stats.inference_seconds > 0


async def test_exit_drains_what_was_submitted() -> None:
    backend = FakeBackend()
    async with Batcher(backend, max_batch_tokens=10_000, max_wait_ms=60_000) as b:
        task = asyncio.create_task(b.submit(["7 a"]))
        await asyncio.sleep(0)
    assert ids(await task) == [7]


async def test_submit_outside_the_context_is_refused_and_empty_is_empty() -> None:
    backend = FakeBackend()
    batcher = Batcher(backend)
    with pytest.raises(RuntimeError, match="not running"):
        await batcher.submit(["1"])
    async with batcher:
        empty = await batcher.submit([])
    assert empty.shape == (0, DIM)
    with pytest.raises(RuntimeError, match="not running"):
        await batcher.submit(["1"])


def test_embed_batch_packs_by_length_and_keeps_input_order() -> None:
    backend = FakeBackend()
    request = [f"{i} " + "w " * (i % 5) for i in range(40)]
    result = embed_batch(backend, request, max_batch_tokens=30, max_batch_size=8)
    assert ids(result) == list(range(40))
    assert result[:, 1].tolist() == [1 + i % 5 for i in range(40)]
    for batch in backend.batches:
        lengths = backend.token_lengths(batch)
        assert len(batch) <= 8
        assert max(lengths) * len(batch) <= 30
        assert lengths == sorted(lengths)


async def test_random_cancellations_never_disturb_the_survivors() -> None:
    rng = random.Random(7)
    backend = FakeBackend(delay=0.002)
    async with Batcher(backend, max_batch_tokens=40, max_batch_size=6, max_wait_ms=2) as b:
        requests = [texts(1000 * r, rng.randint(1, 12)) for r in range(40)]
        tasks = [asyncio.create_task(b.submit(r)) for r in requests]
        doomed = set(rng.sample(range(len(tasks)), 15))
        for index in sorted(doomed):
            await asyncio.sleep(rng.random() * 0.01)
            tasks[index].cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
    for index, (request, result) in enumerate(zip(requests, results, strict=True)):
        if isinstance(result, asyncio.CancelledError):
            assert index in doomed
            continue
        assert isinstance(result, np.ndarray), result
        assert ids(result) == [int(t.split()[0]) for t in request]
    assert b.stats.queue_texts == 0
    assert b.stats.queue_tokens == 0
    assert b.stats.texts + b.stats.cancelled_texts == sum(map(len, requests))


class GatedBackend(FakeBackend):
    """Each ``embed`` call blocks until the test opens the gate of its first text's id.

    Counts how many calls are inside ``embed`` at once, so a test can prove batches overlap (and
    that no more than the limit ever do)."""

    def __init__(self) -> None:
        super().__init__()
        self.gates: dict[int, threading.Event] = {}
        self._lock = threading.Lock()
        self.inside = 0
        self.most_inside = 0
        self.arrived = threading.Semaphore(0)

    def gate(self, first_id: int) -> threading.Event:
        with self._lock:
            return self.gates.setdefault(first_id, threading.Event())

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        gate = self.gate(int(texts[0].split()[0]))
        with self._lock:
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)
        self.arrived.release()
        try:
            if not gate.wait(timeout=10):
                raise TimeoutError("the test never opened this batch's gate")
            return super().embed(texts)
        finally:
            with self._lock:
                self.inside -= 1


async def arrivals(backend: GatedBackend, count: int) -> None:
    """Wait (off the loop) until ``count`` more ``embed`` calls have started."""
    for _ in range(count):
        assert await asyncio.to_thread(backend.arrived.acquire, True, 5), "batch never started"


async def test_concurrent_batches_overlap_and_finish_out_of_order() -> None:
    backend = GatedBackend()
    # One text per batch: "1 …" and "2 …" are two batches, both in flight at once.
    async with Batcher(backend, max_batch_size=1, max_wait_ms=1, concurrent_batches=2) as b:
        first = asyncio.create_task(b.submit(["1 a"]))
        second = asyncio.create_task(b.submit(["2 b"]))
        await arrivals(backend, 2)
        assert backend.inside == 2
        backend.gate(2).set()  # the later batch finishes first...
        assert ids(await asyncio.wait_for(second, 5)) == [2]
        assert not first.done()  # ...without waiting for the earlier one
        backend.gate(1).set()
        assert ids(await asyncio.wait_for(first, 5)) == [1]
    assert b.stats.batches == 2


async def test_concurrent_batches_never_exceed_the_limit() -> None:
    backend = GatedBackend()
    async with Batcher(backend, max_batch_size=1, max_wait_ms=1, concurrent_batches=2) as b:
        work = asyncio.create_task(b.submit(["1 a", "2 b", "3 c", "4 d"]))
        await arrivals(backend, 2)
        await asyncio.sleep(0.05)  # a third batch would have started by now
        assert backend.inside == 2
        for i in (1, 2, 3, 4):
            backend.gate(i).set()
        assert ids(await asyncio.wait_for(work, 5)) == [1, 2, 3, 4]
    assert backend.most_inside == 2


async def test_one_concurrent_batch_runs_batches_one_at_a_time() -> None:
    backend = GatedBackend()
    async with Batcher(backend, max_batch_size=1, max_wait_ms=1, concurrent_batches=1) as b:
        work = asyncio.create_task(b.submit(["1 a", "2 b"]))
        await arrivals(backend, 1)
        await asyncio.sleep(0.05)
        assert backend.inside == 1
        backend.gate(1).set()
        backend.gate(2).set()
        assert ids(await asyncio.wait_for(work, 5)) == [1, 2]
    assert backend.most_inside == 1


async def test_rows_of_one_request_split_over_concurrent_batches_come_back_in_order() -> None:
    backend = GatedBackend()
    # Lengths 3 and 5 tokens: sorted into two batches of two, the request's texts interleaved.
    request = ["10 x x x", "11", "12 x x x", "13"]
    async with Batcher(
        backend, max_batch_size=2, max_wait_ms=1, concurrent_batches=2, max_batch_tokens=64
    ) as b:
        work = asyncio.create_task(b.submit(request))
        await arrivals(backend, 2)
        for first_id in sorted(backend.gates, reverse=True):  # finish the later batch first
            backend.gate(first_id).set()
            await asyncio.sleep(0.01)
        result = await asyncio.wait_for(work, 5)
    assert ids(result) == [10, 11, 12, 13]
    assert result[:, 1].tolist() == [4, 1, 4, 1]
    assert sorted(map(sorted, backend.batches)) == [["10 x x x", "12 x x x"], ["11", "13"]]


async def test_an_error_in_one_concurrent_batch_spares_the_other() -> None:
    backend = GatedBackend()
    async with Batcher(backend, max_batch_size=1, max_wait_ms=1, concurrent_batches=2) as b:
        bad = asyncio.create_task(b.submit(["1 boom"]))
        good = asyncio.create_task(b.submit(["2 b"]))
        await arrivals(backend, 2)
        backend.gate(1).set()  # fails while the good batch is still running
        with pytest.raises(RuntimeError, match="exploded"):
            await asyncio.wait_for(bad, 5)
        assert not good.done()
        backend.gate(2).set()
        assert ids(await asyncio.wait_for(good, 5)) == [2]
    assert (b.stats.batches, b.stats.failed_batches) == (1, 1)


async def test_cancelling_a_request_in_one_concurrent_batch_spares_both_batches() -> None:
    backend = GatedBackend()
    async with Batcher(backend, max_batch_size=2, max_wait_ms=1, concurrent_batches=2) as b:
        # Batch one: "1 a" (doomed) with "2 a"; batch two: "3 a a", "4 a a" (other request).
        doomed = asyncio.create_task(b.submit(["1 a"]))
        kept = asyncio.create_task(b.submit(["2 a", "3 a a", "4 a a"]))
        await arrivals(backend, 2)
        doomed.cancel()
        with pytest.raises(asyncio.CancelledError):
            await doomed
        for gate in list(backend.gates.values()):
            gate.set()
        assert ids(await asyncio.wait_for(kept, 5)) == [2, 3, 4]
    assert (b.stats.batches, b.stats.texts, b.stats.failed_batches) == (2, 4, 0)


async def test_exit_drains_every_concurrent_batch() -> None:
    backend = GatedBackend()
    async with Batcher(backend, max_batch_size=1, max_wait_ms=1, concurrent_batches=3) as b:
        tasks = [asyncio.create_task(b.submit([f"{i} a"])) for i in range(5)]
        await arrivals(backend, 3)
        for i in range(5):
            backend.gate(i).set()
    # The context exited with three batches running and two waiting: all were answered.
    assert [ids(t.result()) for t in tasks] == [[i] for i in range(5)]
    assert b.stats.batches == 5


async def test_stats_add_up_under_concurrency() -> None:
    rng = random.Random(3)
    backend = FakeBackend(delay=0.002)
    async with Batcher(
        backend, max_batch_tokens=40, max_batch_size=6, max_wait_ms=2, concurrent_batches=3
    ) as b:
        requests = [texts(1000 * r, rng.randint(1, 12), words=5) for r in range(40)]
        results = await asyncio.gather(*(b.submit(r) for r in requests))
    for request, result in zip(requests, results, strict=True):
        assert ids(result) == [int(t.split()[0]) for t in request]
    lengths = [backend.token_lengths(batch) for batch in backend.batches]
    stats = b.stats
    assert stats.batches == len(backend.batches)
    assert stats.texts == sum(map(len, requests))
    assert stats.real_tokens == sum(map(sum, lengths))
    assert stats.padded_tokens == sum(max(n) * len(n) for n in lengths)
    assert (stats.queue_texts, stats.queue_tokens, stats.failed_batches) == (0, 0, 0)


async def test_a_crash_while_routing_rows_fails_every_open_request_instead_of_hanging() -> None:
    class Unroutable(FakeBackend):
        """Right shape, rows that cannot be stored: fails after the batch, in the routing."""

        def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
            super().embed(texts)
            return np.full((len(texts), DIM), "x", dtype=object)

    async def use() -> None:
        async with Batcher(Unroutable(), max_wait_ms=1, concurrent_batches=2) as b:
            with pytest.raises(ValueError, match="could not convert"):
                await asyncio.wait_for(b.submit(["1 a"]), 5)
            with pytest.raises(RuntimeError, match="not running"):
                await b.submit(["2 b"])

    with pytest.raises(ValueError, match="could not convert"):  # the loop re-raises it on exit
        await use()


def test_concurrent_batches_must_be_positive() -> None:
    with pytest.raises(ValueError, match="concurrent_batches"):
        Batcher(FakeBackend(), concurrent_batches=0)
