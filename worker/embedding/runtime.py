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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from worker.batcher import Batcher
from worker.config import Settings, env_name, load_settings
from worker.embedding.backend import EmbeddingBackend
from worker.embedding.manifest import DEFAULT_MODEL_DIR, DEFAULT_STATIC_DIR, ManifestError
from worker.errors import ConfigError, ModelNotBuilt
from worker.metrics import Metrics

if TYPE_CHECKING:
    from worker.embedding.loading import LoadedModel


def model_dir_of(settings: Settings) -> Path:
    """The boundary model's directory (the model the embedding strategies place cuts with):
    ``CHUNKSTREAM_MODEL_DIR``, else the distilled static model (docs/semantic.md)."""
    return Path(settings.model_dir) if settings.model_dir else DEFAULT_STATIC_DIR


def retrieval_model_dir(settings: Settings) -> Path:
    """The directory of the model whose vectors go out with ``include_embeddings``:
    ``CHUNKSTREAM_RETRIEVAL_MODEL_DIR``, else the boundary model when one is named, else the
    transformer (``DEFAULT_MODEL_DIR``)."""
    return Path(settings.retrieval_model_dir or settings.model_dir or DEFAULT_MODEL_DIR)


def require_model(model_dir: Path) -> None:
    """Refuse a directory that holds no model of either kind, with the command that makes it."""
    from worker.embedding.loading import model_kind

    try:
        model_kind(model_dir)
    except ManifestError as exc:
        if model_dir.is_dir() and any(model_dir.iterdir()):
            raise ModelNotBuilt(str(exc)) from None  # something is there: say what is wrong
        if model_dir == DEFAULT_STATIC_DIR:
            how = "`chunkstream model distill` (after `chunkstream model build`)"
        elif model_dir == DEFAULT_MODEL_DIR:
            how = "`chunkstream model build`"
        else:
            how = f"`chunkstream model build --out {model_dir}` (or `model distill --out`)"
        raise ModelNotBuilt(f"no embedding model in {model_dir}; build it with {how}") from None


def model_identity(settings: Settings) -> str | None:
    """Who the boundary model is (None without a model there): the manifest's ``identity`` for
    the variant the worker loads, never a digest of serialised files (worker.embedding.identity);
    a model2vec directory without our manifest: the digest of its matrix, tokenizer and config."""
    from worker.embedding.identity import IdentityError
    from worker.embedding.loading import model_identity as identity_of

    try:
        return identity_of(model_dir_of(settings), int8=settings.model_int8)
    except (IdentityError, ManifestError) as exc:
        raise ConfigError(f"invalid setting CHUNKSTREAM_MODEL_DIR: {exc}") from None


async def load_backend(
    settings: Settings,
    metrics: Metrics | None = None,
    *,
    model_dir: Path | None = None,
    setting: str = "MODEL_DIR",
) -> LoadedModel:
    """The model in ``model_dir`` (default: the boundary model), ONNX or static, loaded on a
    thread. ``setting`` names the variable a failure is reported under; the model-info metric
    names the boundary model only."""
    from worker.embedding.embedder import intra_op_threads_for
    from worker.embedding.identity import IdentityError
    from worker.embedding.loading import load_model

    directory = model_dir_of(settings) if model_dir is None else model_dir
    try:
        require_model(directory)
    except ModelNotBuilt as exc:
        if setting == "MODEL_DIR":
            raise
        raise ConfigError(f"invalid setting CHUNKSTREAM_{setting}: {exc}") from None
    # One session serves every concurrent batch; its threads are shared out among them.
    threads = settings.inference_threads or intra_op_threads_for(settings.concurrent_batches)
    try:
        loaded = await asyncio.to_thread(
            load_model, directory, int8=settings.model_int8, intra_op_threads=threads
        )
    except (ManifestError, IdentityError) as exc:  # e.g. int8 of an fp32-only build, a bad matrix
        raise ConfigError(f"invalid setting CHUNKSTREAM_{setting}: {exc}") from None
    if metrics is not None and setting == "MODEL_DIR":
        metrics.model_info.info(
            {
                "dir": str(directory),
                "variant": loaded.variant,
                "dimension": str(loaded.backend.dimension),
                "identity": loaded.identity,
            }
        )
    return loaded


def _planned(settings: Settings) -> Settings:
    """Threads and concurrent batches left to derive (0), planned from this process's CPU
    budget as the worker plans them at start-up, so the CLI and the benches run inference
    as the worker would on the same machine."""
    if settings.inference_threads and settings.concurrent_batches:
        return settings
    from worker import cgroups, resources

    planned, _, _ = resources.plan_cpu(settings, cgroups.host_view(), resources.affinity_cpus())
    return planned


@contextlib.asynccontextmanager
async def open_batcher(
    settings: Settings,
    *,
    backend: EmbeddingBackend | None = None,
    metrics: Metrics | None = None,
) -> AsyncIterator[Batcher]:
    """A running :class:`Batcher` over ``backend`` (default: the boundary model ``settings``
    name), sized by the settings' batch and queue bounds; drained when the block ends."""
    settings = _planned(settings)
    if backend is None:
        backend = (await load_backend(settings, metrics)).backend
    async with _serve(settings, backend, metrics) as batcher:
        yield batcher


@contextlib.asynccontextmanager
async def _serve(
    settings: Settings, backend: EmbeddingBackend, metrics: Metrics | None
) -> AsyncIterator[Batcher]:
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


@dataclass(frozen=True)
class Models:
    """The worker's two model roles (docs/semantic.md, "Two roles, two models"): ``boundary``
    places cuts; ``retrieval`` makes the vectors that go out with ``include_embeddings`` and
    is the same batcher when both roles name one directory (or a backend was injected)."""

    boundary: Batcher
    retrieval: Batcher
    retrieval_label: str  # "kind:identity", carried by chunk events as ``embedding_model``

    @property
    def over_high_watermark(self) -> bool:
        return self.boundary.over_high_watermark or self.retrieval.over_high_watermark

    @property
    def queue_tokens(self) -> int:
        tokens = self.boundary.stats.queue_tokens
        if self.retrieval is not self.boundary:
            tokens += self.retrieval.stats.queue_tokens
        return tokens


@contextlib.asynccontextmanager
async def open_models(
    settings: Settings,
    *,
    backend: EmbeddingBackend | None = None,
    metrics: Metrics | None = None,
) -> AsyncIterator[Models]:
    """The boundary model and, when ``include_embeddings`` names another directory, the
    retrieval model: each loaded once, each behind its own batcher (their batches cannot mix)."""
    settings = _planned(settings)
    async with contextlib.AsyncExitStack() as stack:
        if backend is not None:
            boundary = await stack.enter_async_context(_serve(settings, backend, metrics))
            yield Models(boundary, boundary, "injected")
            return
        loaded = await load_backend(settings, metrics)
        boundary = await stack.enter_async_context(_serve(settings, loaded.backend, metrics))
        retrieval, label = boundary, f"{loaded.kind}:{loaded.identity}"
        other = retrieval_model_dir(settings)
        if settings.include_embeddings and other.resolve() != model_dir_of(settings).resolve():
            second = await load_backend(
                settings, metrics, model_dir=other, setting="RETRIEVAL_MODEL_DIR"
            )
            retrieval = await stack.enter_async_context(_serve(settings, second.backend, metrics))
            label = f"{second.kind}:{second.identity}"
        yield Models(boundary, retrieval, label)


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
    "retrieval_model_dir",
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
