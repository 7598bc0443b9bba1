"""The batcher's direct path for backends where packing does not pay (a static model): the same
vectors as the model gives, small requests on the event loop, large ones on a batcher thread,
calls of at most max_batch_size texts, errors to the request, a drain that waits, and the
metered wrapper's token metrics without tokenising twice. One test runs the real static model."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray

from tests.support.embedding import embed_batch
from worker.inference.batcher import DIRECT_INLINE_CHARS, Batcher
from worker.inference.serving import MeteredBackend
from worker.models.static import StaticEmbedder
from worker.observability.metrics import Metrics

STATIC_DIR = Path(__file__).resolve().parents[2] / ".cache/models/all-MiniLM-L6-v2-static"


class Recording:
    """Vectors from text lengths; records each call's size and thread; no packing."""

    packing_pays = False
    dimension = 3

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[int, str]] = []
        self.measured = 0
        self.fail = fail

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        self.measured += len(texts)
        return [len(t.split()) for t in texts]

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.calls.append((len(texts), threading.current_thread().name))
        if self.fail:
            raise ValueError("model broke")
        return np.array([[len(t), 1.0, 0.0] for t in texts], dtype=np.float32)


class MeasuredRecording(Recording):
    """A static model's shape: vectors and lengths from one call; measuring alone is a bug."""

    def embed_measured(self, texts: Sequence[str]) -> tuple[NDArray[np.float32], list[int]]:
        return self.embed(texts), [len(t.split()) for t in texts]


async def test_small_requests_run_inline_in_calls_of_at_most_the_batch_size() -> None:
    backend = Recording()
    async with Batcher(backend, max_batch_size=4) as batcher:
        texts = [f"text {'x' * i}" for i in range(10)]
        vectors = await batcher.submit(texts)
    assert vectors[:, 0].tolist() == [float(len(t)) for t in texts]
    assert [n for n, _ in backend.calls] == [4, 4, 2]
    assert {thread for _, thread in backend.calls} == {threading.current_thread().name}
    assert batcher.stats.texts == 10
    assert batcher.stats.batches == 3
    assert batcher.stats.real_tokens == batcher.stats.padded_tokens == 19  # "text " is one
    assert batcher.stats.queue_texts == 0


async def test_a_large_request_runs_on_a_batcher_thread_and_a_drain_waits_for_it() -> None:
    backend = Recording()
    big = ["y" * 1000] * (DIRECT_INLINE_CHARS // 1000 + 1)
    async with Batcher(backend) as batcher:
        pending = asyncio.ensure_future(batcher.submit(big))
        await asyncio.sleep(0)  # started before the drain begins
    vectors = await pending
    assert vectors.shape == (len(big), 3)
    assert all(thread.startswith("embed") for _, thread in backend.calls)


async def test_a_model_error_fails_the_request_and_the_batcher_goes_on() -> None:
    async with Batcher(Recording(fail=True)) as batcher:
        with pytest.raises(ValueError, match="model broke"):
            await batcher.submit(["a", "b"])
        with pytest.raises(ValueError, match="model broke"):
            await batcher.submit(["z" * (DIRECT_INLINE_CHARS + 1)])


async def test_a_backend_that_packs_still_goes_through_the_queue() -> None:
    backend = Recording()
    backend.packing_pays = True
    async with Batcher(backend, max_wait_ms=1) as batcher:
        await batcher.submit(["one two", "three"])
    assert all(thread.startswith("embed") for _, thread in backend.calls)


async def test_the_real_static_model_through_the_metered_direct_path() -> None:
    if not (STATIC_DIR / "manifest.json").is_file():
        pytest.fail(f"no static model at {STATIC_DIR}: run scripts/bootstrap")
    model = StaticEmbedder.load(STATIC_DIR)
    metrics = Metrics()
    metered = MeteredBackend(model, metrics)
    assert metered.packing_pays is False
    texts = ["Kafka keeps the order of one partition.", "", "Chunks are keyed by id."] * 30
    async with Batcher(metered, max_batch_size=16) as batcher:
        vectors = await batcher.submit(texts)
    assert np.array_equal(vectors, StaticEmbedder.load(STATIC_DIR).embed(texts))
    real = metrics.embedding_real_tokens._value.get()
    assert real == sum(model.token_lengths(texts))
    assert metrics.embedding_batches._value.get() == -(-len(texts) // 16)


def test_the_synchronous_path_embeds_a_static_model_unpacked_and_the_same() -> None:
    """``embed_batch`` (library callers, the CLI's benches) takes the direct path too: calls of
    at most the batch size, in order, no separate measuring."""
    backend = MeasuredRecording()
    texts = [f"text {'x' * i}" for i in range(10)]
    vectors = embed_batch(backend, texts, max_batch_size=4)
    assert vectors[:, 0].tolist() == [float(len(t)) for t in texts]
    assert [n for n, _ in backend.calls] == [4, 4, 2]
    assert backend.measured == 0
    if not (STATIC_DIR / "manifest.json").is_file():
        pytest.fail(f"no static model at {STATIC_DIR}: run scripts/bootstrap")
    model = StaticEmbedder.load(STATIC_DIR)
    real = ["Kafka keeps the order of one partition.", "", "Chunks are keyed by id."] * 30
    assert np.array_equal(embed_batch(model, real), StaticEmbedder.load(STATIC_DIR).embed(real))
