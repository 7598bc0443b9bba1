"""CPU and memory budgets: what a worker may use, and the settings that follow from it.

Invariants:
- The CPU budget is ``CHUNKSTREAM_CPU_BUDGET`` if set, else the cgroup CPU quota, else the CPUs
  this process may run on (affinity), whichever is smallest of the last two. Inference runs
  ``concurrent_batches`` × ``inference_threads`` threads; derived values keep that product at
  most ``budget − 1`` (one core for the event loop) and at least 1, so under a 1-CPU limit the
  one inference thread shares its core with the loop and nothing else runs.
- The memory budget is ``CHUNKSTREAM_MEMORY_BUDGET`` if set, else the cgroup memory limit, else
  none (then nothing is derived and nothing is checked). With a budget, the worker's bound
  (:func:`memory_bound`) must fit in it: a derived ``max_in_flight_bytes`` is the largest that
  fits (at most the no-budget default), an explicit one that does not fit is a ConfigError that
  names the setting to change, as is a ``max_document_bytes`` too large for any window.
- The memory reserve and the CPU split follow the models the worker loads (:func:`loaded_models`:
  none for rule strategies, the boundary model's kind — static, int8 or fp32 — and the retrieval
  model when ``include_embeddings`` names another one), with per-kind figures measured by
  ``deploy/k8s/measure-sizing`` (docs/operating/sizing.md).
- Pure: :func:`plan` takes the settings, the limits seen and the model kinds;
  ``worker.runtime.cgroups`` reads the limits and :func:`loaded_models` the model directories.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import msgspec

from worker.config import Settings, invalid_setting
from worker.runtime.cgroups import CgroupLimits

MiB = 1024 * 1024
# max_in_flight_bytes without a memory budget, and the most a budget ever derives.
DEFAULT_IN_FLIGHT_BYTES = 256 * MiB
# Embedding batches in flight at once, each on its own inference thread: side-by-side
# single-threaded runs beat one multi-threaded run, because the small per-batch kernels and the
# Python work between batches do not parallelise (docs/benchmarks.md). A
# backend must then use cores ÷ concurrent batches intra-op threads, or the runs oversubscribe.
DEFAULT_CONCURRENT_BATCHES = 2

# Peak bytes held per input byte while a document is in flight: the raw record, the decoded
# text and the encoded chunk events plus the strategy's own peak while it chunks (the embedding
# strategies hold per-sentence vectors and their float64 copies). Calibrated with tracemalloc
# (bench/calibration/semantic_memory.py) and against the kernel's RSS under a flood of large
# documents (tests/broker/test_memory_budget.py), with headroom for what RSS holds beyond
# traced objects: the allocator and several documents in flight at once. The calibration runs
# are in docs/benchmarks.md.
EXPANSION = {
    "sentence": 20,
    "adaptive": 12,
    "lexical": 20,
    "semantic": 160,
    "sdpm": 160,
    "context": 110,
}
EXPANSION_UNKNOWN_RULE = 20
EXPANSION_UNKNOWN_MODEL = 160
# Interpreter, libraries, Kafka clients, metrics: the ready RSS of a rule-strategy worker
# (deploy/k8s/measure-sizing), with headroom.
BASE_RESERVE = 96 * MiB
# The models a worker may load, by what they cost: a static token table, or the transformer
# in one of its two variants.
ModelKind = Literal["static", "int8", "fp32"]
# What a loaded model adds to a ready worker (its ready RSS minus the rule-only worker's,
# deploy/k8s/measure-sizing): the matrix or the ONNX session, the tokenizer, the static model's
# bounded memory of token ids per piece, onnxruntime itself once.
MODEL_RESERVE: dict[ModelKind, int] = {"static": 124 * MiB, "int8": 128 * MiB, "fp32": 192 * MiB}
# What one running batch adds at its peak (the same runs: peak RSS − ready RSS − the window's
# expansion): small for a static model (a gather and a mean); large for the transformer, whose
# onnxruntime arena keeps the largest activations a full batch needed and does not give them back.
BATCH_RESERVE: dict[ModelKind, int] = {"static": 16 * MiB, "int8": 240 * MiB, "fp32": 272 * MiB}
# Sizing chunks in the retrieval model's tokens (docs/concepts/strategies.md, "Sizes"): its
# tokenizer loaded and the bounded memories of token counts per piece (the Python one and the
# compiled core's).
SIZING_RESERVE = 48 * MiB
# The same for the embedding strategies, which size in the retrieval model's tokens without a
# compiled core: the tokenizer and one Python memory of token counts per piece, shared by the
# sizing unit and the boundary model's window.
EMBEDDING_SIZING_RESERVE = 28 * MiB
# The strategies with a compiled core, whose own piece memory the larger reserve counts.
_CORE_STRATEGIES = frozenset({"sentence", "adaptive", "lexical"})
# Allocator slack and whatever the terms above miss.
HEADROOM = 32 * MiB
# Fetched records wait undecoded in the consumer: one response (≤ fetch_max_bytes) per broker
# that leads a partition of this member, or, after a backpressure pause, decoded in the loop's
# held records (worker.consuming.prefetch: at most fetch_max_bytes, the client paused meanwhile).
# Counted
# for three brokers.
FETCH_BROKERS = 3
# A response must admit the largest document whole; it need never bring more than the window.
FETCH_OVERHEAD = 64 * 1024
FETCH_CEILING = 50 * MiB


@dataclass(frozen=True)
class Budgets:
    """The effective settings and where their numbers came from (logged and exported)."""

    settings: Settings
    cpu_cores: float
    cpu_source: str  # "setting", "cgroup" or "affinity"
    memory_bytes: int | None
    memory_source: str  # "setting", "cgroup" or "none"
    memory_bound: int  # memory_bound() of the effective settings
    expansion: int
    models: tuple[ModelKind, ...] = ()  # what the bound and the CPU split were planned for

    @property
    def inference_threads(self) -> int:
        """Inference threads in all (per batch × concurrent batches); 0 without a model."""
        s = self.settings
        return s.inference_threads * s.concurrent_batches if self.models else 0

    def log_fields(self) -> dict[str, object]:
        s = self.settings
        return {
            "cpu_budget_cores": self.cpu_cores,
            "cpu_source": self.cpu_source,
            "models": list(self.models),
            "inference_threads": s.inference_threads,
            "concurrent_batches": s.concurrent_batches,
            "memory_budget_bytes": self.memory_bytes,
            "memory_source": self.memory_source,
            "memory_bound_bytes": self.memory_bound,
            "max_in_flight_bytes": s.max_in_flight_bytes,
            "max_document_bytes": s.max_document_bytes,
            "fetch_max_bytes": fetch_max_bytes(s),
            "expansion": self.expansion,
        }


def affinity_cpus() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def inference_slots(cpu_cores: float) -> int:
    """Inference threads in all (threads × concurrent batches) a CPU budget allows."""
    return max(1, math.floor(cpu_cores + 1e-9) - 1)


def split_slots(
    slots: int, inference_threads: int, concurrent_batches: int, *, intra_op: bool = True
) -> tuple[int, int]:
    """(threads per batch, concurrent batches); 0 in a setting means "derive it". Two batches
    when there is room (one is padded and tokenised while the other runs), never more than
    the slots; explicit values are kept as they are. Without ``intra_op`` (a static model: a
    lookup and a mean on the batch's own thread, no session threads) a batch gets one thread."""
    batches = concurrent_batches or (inference_threads and max(1, slots // inference_threads))
    batches = batches or min(DEFAULT_CONCURRENT_BATCHES, slots)
    threads = inference_threads or (max(1, slots // batches) if intra_op else 1)
    return threads, batches


def fetch_max_bytes(s: Settings) -> int:
    """The consumer's fetch_max_bytes: one whole document, else at most the in-flight window."""
    partition_fetch = s.max_document_bytes + FETCH_OVERHEAD
    return max(partition_fetch, min(FETCH_CEILING, s.max_in_flight_bytes))


def expansion(strategies: list[str]) -> int:
    from worker.chunking import registry

    factors = []
    for name in strategies:
        try:
            needs_model = registry.get(name).needs_model
        except registry.NoSuchStrategy:
            continue  # the worker refuses it at start-up with its own message
        default = EXPANSION_UNKNOWN_MODEL if needs_model else EXPANSION_UNKNOWN_RULE
        factors.append(EXPANSION.get(name, default))
    return max(factors, default=EXPANSION_UNKNOWN_RULE)


def runnable_strategies(s: Settings) -> list[str]:
    from worker.chunking import registry

    if "*" in s.allowed_strategies:
        return registry.names()
    return [s.strategy, *s.allowed_strategies]


def sizes_in_tokens(strategies: list[str]) -> bool:
    """Whether a strategy the worker may run counts its sizes in a model's tokens by default
    (its ``tokenizer`` parameter unset: the retrieval model's tokenizer is then loaded)."""
    from worker.chunking import registry

    names = registry.names()
    return any(
        getattr(registry.get(n).params_type(), "tokenizer", "") is None
        for n in strategies
        if n in names
    )


def memory_bound(s: Settings, strategies: list[str], models: Sequence[ModelKind]) -> int:
    """The most resident memory the worker should reach with settings ``s``
    (docs/operating/sizing.md, "Memory"):

    reserve + headroom + sizing (the tokenizer chunks are counted in)
      + for each model loaded: its reserve + its running batches
      + expansion × (max_in_flight_bytes + max_document_bytes)   # the window may overshoot
      + FETCH_BROKERS × fetch_max_bytes                           # by one document
    """
    reserve = BASE_RESERVE + HEADROOM
    in_tokens = sizes_in_tokens(strategies)
    if in_tokens:
        with_core = sizes_in_tokens([n for n in strategies if n in _CORE_STRATEGIES])
        reserve += SIZING_RESERVE if with_core else EMBEDDING_SIZING_RESERVE
    for kind in models:
        reserve += MODEL_RESERVE[kind] + BATCH_RESERVE[kind] * s.concurrent_batches
    window = expansion(strategies) * (s.max_in_flight_bytes + s.max_document_bytes)
    return reserve + window + FETCH_BROKERS * fetch_max_bytes(s)


def needs_boundary_model(s: Settings) -> bool:
    """Whether a worker with settings ``s`` loads a boundary model (worker.app decides with
    this): its strategy or an allowed override needs one, or any override is allowed and a
    model directory is named."""
    from worker.chunking import registry

    names = registry.names()
    return any(
        registry.get(n).needs_model for n in [s.strategy, *s.allowed_strategies] if n in names
    ) or ("*" in s.allowed_strategies and s.model_dir is not None)


def needs_model(s: Settings) -> bool:
    """Whether a worker with settings ``s`` loads a model at all: a boundary model, or the
    retrieval model for the vectors it sends (worker.app loads them, and the memory plan counts
    them, by this one rule)."""
    return s.include_embeddings or needs_boundary_model(s)


def transformer_kind(s: Settings) -> ModelKind:
    return "int8" if s.model_int8 else "fp32"


def assumed_models(s: Settings) -> tuple[ModelKind, ...]:
    """The models to plan for when their directories are not read: a transformer for each role
    that may load (the costliest kind; what :func:`plan` assumes unless told the real kinds)."""
    if not needs_model(s):
        return ()
    return (transformer_kind(s),) * (2 if s.include_embeddings else 1)


def loaded_models(s: Settings) -> tuple[ModelKind, ...]:
    """The kinds of the models a worker with settings ``s`` loads, from the model references
    the worker resolves (worker.models.reference, as worker.inference.serving resolves them): the
    boundary model when :func:`needs_boundary_model`, and the retrieval model when
    ``include_embeddings`` sends its vectors, unless it is the same model. A role whose model
    is not found counts as the transformer (the worker then refuses it at start-up with its
    own message)."""
    from worker.errors import ModelNotBuilt
    from worker.models.manifest import ManifestError
    from worker.models.reference import ModelRef, find, find_retrieval

    def kind(ref: ModelRef | None) -> ModelKind:
        return "static" if ref is not None and ref.kind == "static" else transformer_kind(s)

    kinds: list[ModelKind] = []
    boundary: ModelRef | None = None
    if needs_boundary_model(s):
        try:
            boundary = find("boundary", s.model_dir, int8=s.model_int8)
        except ModelNotBuilt:
            boundary = None
        kinds.append(kind(boundary))
    if s.include_embeddings:
        try:
            retrieval: ModelRef | None = find_retrieval(
                s.retrieval_model_dir, s.model_dir, int8=s.model_int8
            )
        except (ModelNotBuilt, ManifestError):
            retrieval = None
        same = (
            boundary is not None
            and retrieval is not None
            and (retrieval.directory.resolve(), retrieval.variant)
            == (boundary.directory.resolve(), boundary.variant)
        )
        if not same:
            kinds.append(kind(retrieval))
    return tuple(kinds)


def plan(
    s: Settings,
    limits: CgroupLimits,
    affinity: int,
    models: Sequence[ModelKind] | None = None,
) -> Budgets:
    """Fill in the derived settings (0 = derive) and check the result against the budgets.
    ``models``: the kinds the worker loads (:func:`loaded_models`); None assumes the
    transformer for every role that may load one (:func:`assumed_models`)."""
    models = assumed_models(s) if models is None else tuple(models)
    s, cpu, cpu_source = plan_cpu(s, limits, affinity, models)

    if s.memory_budget > 0:
        memory, memory_source = s.memory_budget, "setting"
    elif limits.memory_bytes is not None:
        memory, memory_source = limits.memory_bytes, "cgroup"
    else:
        memory, memory_source = None, "none"
    strategies = runnable_strategies(s)
    factor = expansion(strategies)
    if s.max_in_flight_bytes == 0:
        derived = DEFAULT_IN_FLIGHT_BYTES
        if memory is not None:
            derived = _largest_window(s, strategies, models, memory)
        s = msgspec.structs.replace(s, max_in_flight_bytes=derived)
    bound = memory_bound(s, strategies, models)
    if memory is not None and bound > memory:
        raise invalid_setting(
            "max_in_flight_bytes",
            f"{s.max_in_flight_bytes} needs up to {bound >> 20} MiB with strategies "
            f"{', '.join(strategies)}, above the memory budget of {memory >> 20} MiB "
            f"({memory_source}); lower it (or unset it to derive it) or raise the budget",
        )
    return Budgets(s, cpu, cpu_source, memory, memory_source, bound, factor, models)


def plan_cpu(
    s: Settings,
    limits: CgroupLimits,
    affinity: int,
    models: Sequence[ModelKind] | None = None,
) -> tuple[Settings, float, str]:
    """The settings with inference threads and concurrent batches derived from the CPU budget,
    the budget, and where it came from ("setting", "cgroup" or "affinity"). Threads per batch
    are onnxruntime's intra-op threads: a static model's batch runs on its own thread alone, so
    with only static models each batch gets one."""
    if s.cpu_budget > 0:
        cpu, cpu_source = s.cpu_budget, "setting"
    elif limits.cpu_cores is not None and limits.cpu_cores < affinity:
        cpu, cpu_source = limits.cpu_cores, "cgroup"
    else:
        cpu, cpu_source = float(affinity), "affinity"
    # Only a static model alone runs its batches without intra-op threads. Without a model the
    # split is never used (0 inference threads are reported): the general rule stays.
    intra_op = not models or any(kind != "static" for kind in models)
    threads, batches = split_slots(
        inference_slots(cpu), s.inference_threads, s.concurrent_batches, intra_op=intra_op
    )
    s = msgspec.structs.replace(s, inference_threads=threads, concurrent_batches=batches)
    return s, cpu, cpu_source


def _largest_window(
    s: Settings, strategies: list[str], models: Sequence[ModelKind], memory: int
) -> int:
    def bound(window: int) -> int:
        return memory_bound(
            msgspec.structs.replace(s, max_in_flight_bytes=window), strategies, models
        )

    def fits(window: int) -> bool:
        return bound(window) <= memory

    low, high = 1, DEFAULT_IN_FLIGHT_BYTES
    if not fits(low):
        smallest = bound(low)
        raise invalid_setting(
            "max_document_bytes",
            f"documents of {s.max_document_bytes} bytes need {smallest >> 20} MiB with strategies "
            f"{', '.join(strategies)}, above the memory budget of {memory >> 20} MiB; "
            "lower it, or raise the budget",
        )
    if fits(high):
        return high
    while high - low > 1:  # the bound grows with the window: the largest window that fits
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low
