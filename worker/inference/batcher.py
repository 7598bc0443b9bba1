"""The process-wide embedding micro-batcher: many requests in, few well-packed batches out.

``Batcher`` is the asyncio driver around :class:`worker.inference.batch_policy.BatchPolicy`:
requests (lists of texts) from every document in flight are measured in tokens, queued, packed by
the policy, and run on dedicated worker threads — up to ``concurrent_batches`` batches at once — so
the event loop, and with it the Kafka heartbeats, never waits on the model. Each request gets its
rows back in its own order, whichever of its batches finishes first.

Failure and cancellation are per request: a cancelled request's waiting texts are dropped (rows
of it already in a running batch are computed and discarded; the batch's other requests are
unaffected), and an inference error fails exactly the requests with texts in that batch.

A backend that says packing does not pay (``packing_pays = False``: a static model, whose cost
is its real tokens whatever the batch) skips the queue: each request is embedded as it comes, on
the event loop when small (:data:`DIRECT_INLINE_CHARS`), on the batcher's threads otherwise, in
calls of at most ``max_batch_size`` texts.

Backpressure: the queued token count drives a high/low watermark; the consumer reads
``over_high_watermark`` (or registers ``on_watermark``) to pause and resume its partitions.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from types import TracebackType

import numpy as np
from numpy.typing import NDArray

from worker.inference.batch_policy import Batch, BatchPolicy, Watermark
from worker.models.backend import EmbeddingBackend
from worker.runtime.resources import DEFAULT_CONCURRENT_BATCHES

# Defaults sized for MiniLM on a small CPU (bench/embedding_bench.py measures them; the figures
# are in docs/benchmarks.md). The queue limit is also the sorting window: a
# wider one pads less, but it is also how long a paused partition may wait, so it stays a few
# seconds of work. Larger batches pad more than they save.
DEFAULT_MAX_BATCH_TOKENS = 4096
DEFAULT_MAX_BATCH_SIZE = 64
DEFAULT_MAX_WAIT_MS = 5.0
DEFAULT_QUEUE_HIGH_TOKENS = 32768
DEFAULT_QUEUE_LOW_TOKENS = 16384
# Requests with more texts than this are measured (tokenised) on a thread: a long document's
# tokenising would hold the event loop. Smaller ones stay inline, where a thread hop would cost
# more than the tokenising.
MEASURE_IN_THREAD_OVER = 64
# A backend whose cost is its real tokens, with nothing to pad and no per-call setup to share (a
# static model: ``packing_pays = False``), gains nothing from queueing and packing, which cost
# more than its work per text (bench/static_bench.py): its requests are embedded as they come,
# on the event loop when they hold at most this many characters (a few milliseconds of the
# compiled rows, less than the document's own plan and assembly, which run on the loop
# anyway), on the batcher's threads otherwise. At one core a thread hop buys nothing and costs
# a switch; the end-to-end comparison is in docs/benchmarks.md.
DIRECT_INLINE_CHARS = 64 * 1024


@dataclass
class BatcherStats:
    """Counters since start. ``queue_*`` are levels now, the rest only grow.

    ``inference_seconds`` adds up each batch's own wall time, so with concurrent batches it can
    exceed the time elapsed."""

    batches: int = 0
    texts: int = 0
    real_tokens: int = 0
    padded_tokens: int = 0
    inference_seconds: float = 0.0
    failed_batches: int = 0
    cancelled_texts: int = 0
    queue_texts: int = 0
    queue_tokens: int = 0
    high_watermark_hits: int = 0


@dataclass(eq=False)  # identity equality and hashing: a request is a key of the policy
class _Request:
    texts: Sequence[str]
    future: asyncio.Future[NDArray[np.float32]]
    rows: NDArray[np.float32]
    remaining: int
    keys: list[tuple[_Request, int]] = field(default_factory=list)


_Key = tuple[_Request, int]


class Batcher:
    """``async with Batcher(backend, ...) as batcher: vectors = await batcher.submit(texts)``."""

    def __init__(
        self,
        backend: EmbeddingBackend,
        *,
        max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
        max_wait_ms: float = DEFAULT_MAX_WAIT_MS,
        queue_high_tokens: int = DEFAULT_QUEUE_HIGH_TOKENS,
        queue_low_tokens: int = DEFAULT_QUEUE_LOW_TOKENS,
        on_watermark: Callable[[bool], None] | None = None,
        concurrent_batches: int = DEFAULT_CONCURRENT_BATCHES,
    ) -> None:
        if concurrent_batches < 1:
            raise ValueError(f"concurrent_batches must be >= 1, got {concurrent_batches}")
        self._backend = backend
        self._packing_pays: bool = getattr(backend, "packing_pays", True)
        self._concurrent_batches = concurrent_batches
        self._policy: BatchPolicy[_Key] = BatchPolicy(
            max_batch_tokens=max_batch_tokens,
            max_batch_size=max_batch_size,
            max_wait=max_wait_ms / 1000.0,
        )
        self._watermark = Watermark(high=queue_high_tokens, low=queue_low_tokens)
        self._on_watermark = on_watermark
        self._stats = BatcherStats()
        self._executor: ThreadPoolExecutor | None = None
        self._runner: asyncio.Task[None] | None = None
        # Batches handed to the executor and not yet routed back; a slot frees when one ends.
        self._running: set[asyncio.Task[None]] = set()
        # An unexpected error inside a batch task (a bug, not an inference error): the loop
        # re-raises it, so it fails every open request instead of vanishing with the task.
        self._crashed: BaseException | None = None
        self._wakeup = asyncio.Event()
        self._closing = False
        # Submissions being measured on a thread, not yet queued: a drain waits for them.
        self._measuring = 0
        # Requests not yet answered, so that a crash of the loop can still answer them.
        self._open: set[_Request] = set()

    # -- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> Batcher:
        if self._runner is not None:
            raise RuntimeError("Batcher already started")
        # One thread per concurrent batch; the model's own intra-op threads (if any) do the
        # parallel work inside each.
        self._executor = ThreadPoolExecutor(
            max_workers=self._concurrent_batches, thread_name_prefix="embed"
        )
        self._runner = asyncio.create_task(self._run(), name="embedding-batcher")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Drain: every text already submitted is still embedded, then the thread stops."""
        self._closing = True
        self._wakeup.set()
        if self._runner is not None:
            await self._runner
        if self._executor is not None:
            self._executor.shutdown(wait=False)

    # -- public surface ----------------------------------------------------------------------

    @property
    def dimension(self) -> int:
        return self._backend.dimension

    @property
    def stats(self) -> BatcherStats:
        """A snapshot; safe to keep."""
        return replace(
            self._stats,
            queue_texts=self._policy.queued_texts,
            queue_tokens=self._policy.queued_tokens,
        )

    @property
    def over_high_watermark(self) -> bool:
        return self._watermark.over

    async def submit(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Embeddings of ``texts``, ``[len(texts), dimension]`` float32, in the given order."""
        if self._runner is None or self._closing:
            raise RuntimeError("Batcher is not running (use `async with batcher:`)")
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if not self._packing_pays:
            return await self._direct(texts)
        if len(texts) > MEASURE_IN_THREAD_OVER:
            # Cancelled here, nothing is queued yet; the thread finishes and its answer is dropped.
            # A drain started meanwhile waits for this request (see _run).
            self._measuring += 1
            try:
                lengths = await asyncio.to_thread(self._backend.token_lengths, texts)
            finally:
                self._measuring -= 1
                self._wakeup.set()
            if self._runner.done():  # the loop crashed while this was measured
                raise RuntimeError("Batcher stopped while the request was being measured")
        else:
            lengths = self._backend.token_lengths(texts)
        if len(lengths) != len(texts):
            raise RuntimeError("backend.token_lengths returned a wrong number of lengths")
        loop = asyncio.get_running_loop()
        request = _Request(
            texts=texts,
            future=loop.create_future(),
            rows=np.empty((len(texts), self.dimension), dtype=np.float32),
            remaining=len(texts),
        )
        self._open.add(request)
        request.future.add_done_callback(lambda _: self._open.discard(request))
        now = loop.time()
        for index, length in enumerate(lengths):
            key = (request, index)
            request.keys.append(key)
            self._policy.add(key, length, now)
        self._queue_changed()
        self._wakeup.set()
        try:
            return await request.future
        except asyncio.CancelledError:
            self._stats.cancelled_texts += self._policy.remove(request.keys)
            self._queue_changed()
            raise

    async def _direct(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """A request embedded at once, unqueued: inline when small, else on a batcher thread
        (a drain waits for it). Calls to the backend hold at most ``max_batch_size`` texts."""
        if sum(map(len, texts)) <= DIRECT_INLINE_CHARS:
            vectors, lengths, seconds = self._embed_now(texts)
        else:
            assert self._executor is not None
            self._measuring += 1
            try:
                loop = asyncio.get_running_loop()
                vectors, lengths, seconds = await loop.run_in_executor(
                    self._executor, self._embed_now, texts
                )
            finally:
                self._measuring -= 1
                self._wakeup.set()
        # Counters change only on the event loop, as for packed batches.
        stats = self._stats
        stats.inference_seconds += seconds
        stats.batches += -(-len(texts) // self._policy.max_batch_size)
        stats.texts += len(texts)
        tokens = sum(lengths)
        stats.real_tokens += tokens
        stats.padded_tokens += tokens  # nothing is padded
        return vectors

    def _embed_now(self, texts: Sequence[str]) -> tuple[NDArray[np.float32], list[int], float]:
        started = time.perf_counter()
        vectors, lengths = embed_unpacked(self._backend, texts, self._policy.max_batch_size)
        if vectors.shape != (len(texts), self.dimension):
            raise RuntimeError(
                f"backend returned shape {vectors.shape}, expected {(len(texts), self.dimension)}"
            )
        return vectors, lengths, time.perf_counter() - started

    # -- the loop ----------------------------------------------------------------------------

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                if self._crashed is not None:
                    raise self._crashed
                deadline = None  # slots all busy: a finishing batch wakes the loop
                if len(self._running) < self._concurrent_batches:
                    batch = self._policy.next_batch(loop.time(), flush=self._closing)
                    if batch is not None:
                        self._queue_changed()
                        self._start(batch)
                        continue
                    deadline = self._policy.next_deadline()
                drained = not self._running and not self._policy.queued_texts
                if self._closing and drained and not self._measuring:
                    return
                await self._sleep_until(deadline)
        except BaseException as exc:
            # A bug or a cancelled loop must not leave callers awaiting forever.
            self._closing = True
            for task in self._running:
                task.cancel()
            failure = exc if isinstance(exc, Exception) else RuntimeError("batcher stopped")
            self._fail(set(self._open), failure)
            raise

    def _start(self, batch: Batch[_Key]) -> None:
        task = asyncio.create_task(self._run_batch(batch), name="embedding-batch")
        self._running.add(task)
        task.add_done_callback(self._batch_ended)

    def _batch_ended(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self._crashed = task.exception()
        self._wakeup.set()

    async def _sleep_until(self, deadline: float | None) -> None:
        """Wait for a new submission, or until the oldest text is due."""
        self._wakeup.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout_at(deadline):
                await self._wakeup.wait()

    async def _run_batch(self, batch: Batch[_Key]) -> None:
        assert self._executor is not None
        texts = [request.texts[index] for request, index in batch.keys]
        loop = asyncio.get_running_loop()
        started = time.perf_counter()
        try:
            vectors = await loop.run_in_executor(self._executor, self._backend.embed, texts)
            if vectors.shape != (len(texts), self.dimension):
                raise RuntimeError(
                    f"backend returned shape {vectors.shape}, "
                    f"expected {(len(texts), self.dimension)}"
                )
        except Exception as exc:
            # Counters change only here on the event loop, so concurrent batches need no lock.
            self._stats.failed_batches += 1
            self._fail({request for request, _ in batch.keys}, exc)
            return
        finally:
            self._stats.inference_seconds += time.perf_counter() - started

        self._stats.batches += 1
        self._stats.texts += len(texts)
        self._stats.real_tokens += batch.real_tokens
        self._stats.padded_tokens += batch.padded_tokens
        for row, (request, index) in enumerate(batch.keys):
            if request.future.done():  # cancelled, or failed in another batch
                continue
            request.rows[index] = vectors[row]
            request.remaining -= 1
            if request.remaining == 0:
                request.future.set_result(request.rows)

    def _fail(self, requests: set[_Request], exc: Exception) -> None:
        for request in requests:
            # Its texts still waiting would only be computed to be thrown away.
            self._policy.remove(request.keys)
            if not request.future.done():
                request.future.set_exception(exc)
        self._queue_changed()

    def _queue_changed(self) -> None:
        if not self._watermark.update(self._policy.queued_tokens):
            return
        over = self._watermark.over
        if over:
            self._stats.high_watermark_hits += 1
        if self._on_watermark is not None:
            self._on_watermark(over)


def embed_unpacked(
    backend: EmbeddingBackend, texts: Sequence[str], max_batch_size: int
) -> tuple[NDArray[np.float32], list[int]]:
    """``texts`` embedded in order, in calls of at most ``max_batch_size`` texts, with their
    token lengths: the path of a backend where packing does not pay."""
    measured = getattr(backend, "embed_measured", None)
    if measured is not None:  # vectors and lengths from one tokenization (a static model)
        parts, lengths = [], []
        for i in range(0, len(texts), max_batch_size):
            vectors, part_lengths = measured(texts[i : i + max_batch_size])
            parts.append(vectors)
            lengths.extend(part_lengths)
    else:
        # Measured first: a metered backend keeps the lengths for its metrics, and a static
        # model keeps the token ids, so embed() does not tokenise a second time.
        lengths = backend.token_lengths(texts)
        parts = [
            backend.embed(texts[i : i + max_batch_size])
            for i in range(0, len(texts), max_batch_size)
        ]
    return (parts[0] if len(parts) == 1 else np.concatenate(parts)), lengths
