"""Models at run time: resolve each role once, load it, meter it, serve it through a Batcher.

The app-level wiring between the run-time model room (:mod:`worker.models`: what a model is,
how it embeds) and the worker's settings, batcher and metrics.

Invariants:

- Each role is resolved once per process (:func:`resolve`) into a
  :class:`~worker.models.reference.ModelRef`; the strategies' ``BuildContext``, the loader, the
  chunk ids, the model-info metric and the CLI all receive that value. A strategy built
  outside the worker (``chunkstream chunk``, the library's ``worker.build``) gets its models
  from :func:`build_context`, the same resolution: the same chunks and fingerprint.
- Every caller that embeds documents — the worker, ``chunkstream chunk``, ``chunkstream
  embed``, the benches — gets its vectors from :func:`open_batcher` / :func:`open_models`, so
  every inference batch is bounded by the same ``max_batch_tokens``/``max_batch_size``.
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
from typing import Any

import numpy as np
from numpy.typing import NDArray

from worker.chunking import registry
from worker.chunking.contract import BuildContext
from worker.chunking.registry import BuiltStrategy
from worker.config import Settings, env_name, invalid_setting, load_settings
from worker.errors import ModelNotBuilt
from worker.inference.batcher import Batcher
from worker.models.backend import EmbeddingBackend
from worker.models.manifest import ManifestError
from worker.models.reference import ModelRef, find, find_retrieval
from worker.observability.metrics import Metrics


@dataclass(frozen=True)
class ModelRefs:
    """The two roles, resolved: ``None`` where a role is not needed (or, for retrieval sizing
    of the rule strategies, not installed)."""

    boundary: ModelRef | None
    retrieval: ModelRef | None


def boundary_ref(settings: Settings, model_dir: str | None = None) -> ModelRef:
    """The boundary model (``model_dir`` — a command's flag — else ``CHUNKSTREAM_MODEL_DIR``,
    else the default static model on the search path); :class:`ModelNotBuilt` says where it
    looked."""
    return find("boundary", model_dir or settings.model_dir, int8=settings.model_int8)


def retrieval_ref(settings: Settings, model_dir: str | None = None) -> ModelRef:
    """The retrieval model (``CHUNKSTREAM_RETRIEVAL_MODEL_DIR``, else the boundary model's
    directory — ``model_dir`` or ``MODEL_DIR`` — when it is an ONNX build, else the default
    transformer on the search path)."""
    try:
        return find_retrieval(
            settings.retrieval_model_dir,
            model_dir or settings.model_dir,
            int8=settings.model_int8,
        )
    except ManifestError as exc:  # MODEL_DIR's manifest unreadable while deciding
        raise ModelNotBuilt(str(exc)) from None


def resolve(
    settings: Settings, *, boundary: bool, retrieval: bool, model_dir: str | None = None
) -> ModelRefs:
    """Each role resolved once: required where asked for (``ModelNotBuilt`` otherwise); the
    retrieval model is also looked up, optionally, when it is not required, because the
    strategies size chunks in its tokens when it is there (docs/concepts/strategies.md,
    "Sizes"). ``model_dir`` (a command's flag) takes the place of ``CHUNKSTREAM_MODEL_DIR``."""
    boundary_model = boundary_ref(settings, model_dir) if boundary else None
    if retrieval:
        retrieval_model: ModelRef | None = retrieval_ref(settings, model_dir)
    else:
        try:
            retrieval_model = retrieval_ref(settings, model_dir)
        except ModelNotBuilt:
            if settings.retrieval_model_dir is not None:
                raise  # named explicitly: a wrong name is an error, not a fallback
            retrieval_model = None
    return ModelRefs(boundary_model, retrieval_model)


def build_context(
    strategy: str, settings: Settings | None = None, *, model_dir: str | None = None
) -> BuildContext:
    """The models ``strategy`` is built with, resolved as the worker and ``chunkstream chunk``
    resolve them (:func:`resolve`): the boundary model when the strategy needs one (else
    :class:`ModelNotBuilt`), and the retrieval model, whose tokens size every strategy, when it
    is found. ``settings``: the inference settings, from the environment by default
    (:func:`inference_settings`: ``CHUNKSTREAM_MODEL_DIR``, ``CHUNKSTREAM_RETRIEVAL_MODEL_DIR``,
    the model search path); ``model_dir`` (a command's flag) in place of
    ``CHUNKSTREAM_MODEL_DIR``. The public default model references (``worker.build_context``)."""
    settings = inference_settings() if settings is None else settings
    needs_model = registry.get(strategy).needs_model
    refs = resolve(settings, boundary=needs_model, retrieval=False, model_dir=model_dir)
    return BuildContext(boundary=refs.boundary, retrieval=refs.retrieval)


def build_strategy(
    name: str,
    params: Mapping[str, Any] | None = None,
    context: BuildContext | None = None,
    *,
    settings: Settings | None = None,
) -> BuiltStrategy:
    """``name`` with ``params`` built as the worker builds it: with the models of
    :func:`build_context` unless ``context`` names others (``BuildContext()``: none, sizes in
    characters), so a library caller cuts the worker's chunks and gets its fingerprint (the
    public ``worker.build``)."""
    if context is None:
        context = build_context(name, settings)
    return registry.build(name, params, context)


def intra_op_threads_for(concurrent_batches: int) -> int:
    """Intra-op threads per session run when ``concurrent_batches`` run at once: the CPUs this
    process may use — the cgroup CPU quota when there is one, not the node's cores — shared
    out (at least one). More would make the runs fight over cores (and be throttled)."""
    from worker.runtime.cgroups import host_view
    from worker.runtime.resources import affinity_cpus

    cpus = affinity_cpus()
    quota = host_view().cpu_cores
    if quota is not None:
        cpus = min(cpus, max(1, int(quota)))
    return max(1, cpus // max(1, concurrent_batches))


async def load(
    ref: ModelRef, settings: Settings, metrics: Metrics | None = None
) -> EmbeddingBackend:
    """The backend of ``ref``, loaded on a thread; the model-info metric says who it is."""
    from worker.models.loading import load_backend

    # One session serves every concurrent batch; its threads are shared out among them.
    threads = settings.inference_threads or intra_op_threads_for(settings.concurrent_batches)
    setting = "model_dir" if ref.role == "boundary" else "retrieval_model_dir"
    try:
        backend = await asyncio.to_thread(load_backend, ref, intra_op_threads=threads)
    except ManifestError as exc:  # e.g. a matrix that does not match its manifest
        raise invalid_setting(setting, exc) from None
    compile_static(backend)
    if metrics is not None:
        metrics.model_info.labels(ref.role).info(
            {
                "dir": str(ref.directory),
                "variant": ref.variant,
                "dimension": str(ref.dimension),
                "identity": ref.identity,
            }
        )
    return backend


def compile_static(backend: EmbeddingBackend) -> bool:
    """Hands a static model the compiled rows (worker.chunking._native.static_sums: the model
    room may not import the cores). True when it takes them; the same vectors either way."""
    from worker.chunking import _native
    from worker.models.static import StaticEmbedder

    return isinstance(backend, StaticEmbedder) and backend.use_compiled(_native.static_sums)


def _planned(settings: Settings) -> Settings:
    """Threads and concurrent batches left to derive (0), planned from this process's CPU
    budget as the worker plans them at start-up, so the CLI and the benches run inference
    as the worker would on the same machine."""
    if settings.inference_threads and settings.concurrent_batches:
        return settings
    from worker.runtime import cgroups, resources

    planned, _, _ = resources.plan_cpu(settings, cgroups.host_view(), resources.affinity_cpus())
    return planned


@contextlib.asynccontextmanager
async def open_batcher(
    settings: Settings,
    *,
    model: ModelRef | None = None,
    backend: EmbeddingBackend | None = None,
    metrics: Metrics | None = None,
) -> AsyncIterator[Batcher]:
    """A running :class:`Batcher` over ``backend``, else over ``model`` loaded (default: the
    boundary model ``settings`` name), sized by the settings' batch and queue bounds; drained
    when the block ends."""
    settings = _planned(settings)
    if backend is None:
        backend = await load(model or boundary_ref(settings), settings, metrics)
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
    """The worker's two model roles (docs/concepts/models.md): ``boundary``
    places cuts; ``retrieval`` makes the vectors that go out with ``include_embeddings`` and
    is the same batcher when both roles name one directory (or a backend was injected)."""

    boundary: Batcher
    retrieval: Batcher
    retrieval_label: str  # "kind:identity", carried by chunk events as ``embedding_model``
    refs: ModelRefs

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
    refs: ModelRefs,
    *,
    backend: EmbeddingBackend | None = None,
    metrics: Metrics | None = None,
) -> AsyncIterator[Models]:
    """The boundary model and, when ``include_embeddings`` needs another one, the retrieval
    model: each loaded once, each behind its own batcher (their batches cannot mix). An
    injected ``backend`` (tests) serves both roles."""
    settings = _planned(settings)
    async with contextlib.AsyncExitStack() as stack:
        if backend is not None:
            boundary = await stack.enter_async_context(_serve(settings, backend, metrics))
            yield Models(boundary, boundary, "injected", refs)
            return
        first = refs.boundary or refs.retrieval
        if first is None:
            raise ValueError("open_models needs at least one model reference")
        boundary = await stack.enter_async_context(
            _serve(settings, await load(first, settings, metrics), metrics)
        )
        retrieval, label = boundary, first.label
        other = refs.retrieval
        if (
            settings.include_embeddings
            and other is not None
            and other is not first
            and (other.directory.resolve(), other.variant)
            != (first.directory.resolve(), first.variant)
        ):
            second = await load(other, settings, metrics)
            retrieval = await stack.enter_async_context(_serve(settings, second, metrics))
            label = other.label
        yield Models(boundary, retrieval, label, refs)


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

    @property
    def packing_pays(self) -> bool:
        """The wrapped model's answer (worker.inference.batcher): metering changes nothing about
        it."""
        return bool(getattr(self._inner, "packing_pays", True))

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
        started = time.perf_counter()
        vectors = self._inner.embed(texts)
        self._record(len(texts), lengths, time.perf_counter() - started)
        return vectors

    def embed_measured(self, texts: Sequence[str]) -> tuple[NDArray[np.float32], list[int]]:
        """The vectors and the token lengths, from one tokenization where the model offers it
        (a static model's ``embed_measured``), else measured first as :meth:`embed` does."""
        inner = getattr(self._inner, "embed_measured", None)
        if inner is None:
            lengths = self.token_lengths(texts)
            return self.embed(texts), lengths
        started = time.perf_counter()
        vectors, lengths = inner(texts)
        self._record(len(texts), lengths, time.perf_counter() - started)
        return vectors, lengths

    def _record(self, texts: int, lengths: list[int], seconds: float) -> None:
        padded = max(lengths, default=0) * texts
        m = self._metrics
        m.inference_seconds.inc(seconds)
        m.embedding_batches.inc()
        m.batch_texts.observe(texts)
        m.batch_tokens.observe(padded)
        real = sum(lengths)
        with self._lock:
            self._real += real
            self._padded += padded
            ratio = 1 - self._real / self._padded if self._padded else 0.0
        m.embedding_real_tokens.inc(real)
        m.embedding_padded_tokens.inc(padded)
        m.padding_ratio.set(ratio)


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
