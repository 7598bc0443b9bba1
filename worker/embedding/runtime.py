"""The embedding model at run time: find it, load it, meter it, and serve it through a Batcher.

Invariants:

- Every caller that embeds documents — the worker, ``chunkstream chunk``, ``chunkstream
  embed``, the benches — gets its vectors from :func:`open_batcher`, so every inference batch
  is bounded by the same ``max_batch_tokens``/``max_batch_size`` settings.
- A model directory without a manifest is refused before anything loads, with the command
  that builds it (:class:`ModelNotBuilt`).
- Loading runs off the event loop (it takes seconds; ``/healthz`` keeps answering meanwhile).
- :class:`MeteredBackend` records each batch where it runs (the inference thread), and never
  tokenises a text twice to do so.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from worker.batcher import Batcher
from worker.config import Settings, env_name, load_settings
from worker.embedding.backend import EmbeddingBackend
from worker.embedding.manifest import (
    DEFAULT_MODEL_DIR,
    MANIFEST_NAME,
    ManifestError,
)
from worker.errors import ConfigError, ModelNotBuilt
from worker.metrics import Metrics


def model_dir_of(settings: Settings) -> Path:
    """The directory the model is loaded from: the setting, else the default build."""
    return Path(settings.model_dir) if settings.model_dir else DEFAULT_MODEL_DIR


def require_model(model_dir: Path) -> None:
    if not (model_dir / MANIFEST_NAME).is_file():
        out = "" if model_dir == DEFAULT_MODEL_DIR else f" --out {model_dir}"
        raise ModelNotBuilt(
            f"no embedding model in {model_dir}; build it with `chunkstream model build{out}`"
        )


def model_identity(settings: Settings) -> str | None:
    """Who the model is (None without a model directory): the manifest's ``identity`` for the
    variant the worker loads, never a digest of the files (worker.embedding.identity)."""
    from worker.embedding.identity import IdentityError, read_model_head, variant_identity

    model_dir = model_dir_of(settings)
    try:
        head = read_model_head(model_dir)
        return None if head is None else variant_identity(head, model_dir, int8=settings.model_int8)
    except IdentityError as exc:
        raise ConfigError(f"invalid setting CHUNKSTREAM_MODEL_DIR: {exc}") from None


async def load_backend(settings: Settings, metrics: Metrics | None = None) -> EmbeddingBackend:
    """The ONNX model named by ``settings``, loaded on a thread."""
    model_dir = model_dir_of(settings)
    require_model(model_dir)
    from worker.embedding.embedder import OnnxEmbedder, intra_op_threads_for

    # One session serves every concurrent batch; its threads are shared out among them.
    threads = settings.inference_threads or intra_op_threads_for(settings.concurrent_batches)
    try:
        embedder = await asyncio.to_thread(
            OnnxEmbedder.load, model_dir, int8=settings.model_int8, intra_op_threads=threads
        )
    except ManifestError as exc:  # e.g. an fp32-only build asked for int8
        raise ConfigError(f"invalid setting CHUNKSTREAM_MODEL_DIR: {exc}") from None
    if metrics is not None:
        metrics.model_info.info(
            {
                "dir": str(model_dir),
                "variant": "int8" if settings.model_int8 else "fp32",
                "dimension": str(embedder.dimension),
                "identity": model_identity(settings) or "",
            }
        )
    return embedder


@contextlib.asynccontextmanager
async def open_batcher(
    settings: Settings,
    *,
    backend: EmbeddingBackend | None = None,
    metrics: Metrics | None = None,
) -> AsyncIterator[Batcher]:
    """A running :class:`Batcher` over ``backend`` (default: the model ``settings`` name),
    sized by the settings' batch and queue bounds; drained when the block ends.

    Threads and concurrent batches left to derive (0) are planned from this process's CPU
    budget as the worker plans them at start-up, so the CLI and the benches run inference
    as the worker would on the same machine."""
    if settings.inference_threads == 0 or settings.concurrent_batches == 0:
        from worker import cgroups, resources

        settings, _, _ = resources.plan_cpu(
            settings, cgroups.host_view(), resources.affinity_cpus()
        )
    if backend is None:
        backend = await load_backend(settings, metrics)
    if metrics is not None:
        backend = MeteredBackend(backend, metrics)
    async with Batcher(
        backend,
        max_batch_tokens=settings.max_batch_tokens,
        max_batch_size=settings.max_batch_size,
        max_wait_ms=settings.max_wait_ms,
        queue_high_tokens=settings.max_queued_tokens,
        queue_low_tokens=settings.max_queued_tokens // 2,
        concurrent_batches=settings.concurrent_batches,
    ) as batcher:
        yield batcher


class MeteredBackend:
    """Wraps the model so every batch is measured where it runs (the inference thread).

    Lengths measured when texts are queued are remembered until their batch runs, so the
    batch's padded size is known without tokenising a second time."""

    _REMEMBERED = 65536

    def __init__(self, inner: EmbeddingBackend, metrics: Metrics) -> None:
        self._inner = inner
        self._metrics = metrics
        self._lengths: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()  # token_lengths: event loop; embed: inference thread
        self._real = 0
        self._padded = 0

    @property
    def dimension(self) -> int:
        return self._inner.dimension

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        lengths = self._inner.token_lengths(texts)
        with self._lock:
            self._lengths.update(zip(texts, lengths, strict=True))
            while len(self._lengths) > self._REMEMBERED:
                self._lengths.popitem(last=False)
        return lengths

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        with self._lock:
            known = [self._lengths.pop(t, None) for t in texts]
        lengths = [n if n is not None else 0 for n in known]
        if any(n is None for n in known):  # evicted meanwhile: measure again
            lengths = self._inner.token_lengths(texts)
        padded = max(lengths, default=0) * len(texts)
        started = time.perf_counter()
        vectors = self._inner.embed(texts)
        m = self._metrics
        m.inference_seconds.inc(time.perf_counter() - started)
        m.embedding_batches.inc()
        m.batch_texts.observe(len(texts))
        m.batch_tokens.observe(padded)
        real = sum(lengths)
        with self._lock:
            self._real += real
            self._padded += padded
            ratio = 1 - self._real / self._padded if self._padded else 0.0
        m.embedding_real_tokens.inc(real)
        m.embedding_padded_tokens.inc(padded)
        m.padding_ratio.set(ratio)
        return vectors


# The settings that shape inference. Offline commands read them from the environment too, so
# `chunkstream chunk` packs its batches exactly as a worker configured alike would.
INFERENCE_SETTINGS = (
    "model_dir",
    "model_int8",
    "inference_threads",
    "concurrent_batches",
    "max_batch_tokens",
    "max_batch_size",
    "max_wait_ms",
    "max_queued_tokens",
)


def inference_settings(env: Mapping[str, str] | None = None, **flags: Any) -> Settings:
    """Settings for an offline command: the inference settings from ``env`` (default: the
    process environment; Kafka settings are ignored), then ``flags`` that are not None."""
    env = os.environ if env is None else env
    names = {env_name(field) for field in INFERENCE_SETTINGS}
    return load_settings(flags, env={k: v for k, v in env.items() if k in names})
