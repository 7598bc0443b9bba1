"""Synchronous embedding with the batcher's packing, no event loop: what tests and benchmarks
use to embed a plan's texts outside the worker (the worker embeds only through
worker.inference.batcher.Batcher)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from worker.inference.batch_policy import BatchPolicy
from worker.inference.batcher import (
    DEFAULT_MAX_BATCH_SIZE,
    DEFAULT_MAX_BATCH_TOKENS,
    embed_unpacked,
)
from worker.models.backend import EmbeddingBackend


def embed_batch(
    backend: EmbeddingBackend,
    texts: Sequence[str],
    *,
    max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS,
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
) -> NDArray[np.float32]:
    """Synchronous embedding of ``texts`` with the batcher's packing (for tests and benchmarks);
    a backend where packing does not pay is embedded as the batcher's direct path does it."""
    out = np.empty((len(texts), backend.dimension), dtype=np.float32)
    if not texts:
        return out
    if not getattr(backend, "packing_pays", True):
        out[:] = embed_unpacked(backend, texts, max_batch_size)[0]
        return out
    policy: BatchPolicy[int] = BatchPolicy(
        max_batch_tokens=max_batch_tokens, max_batch_size=max_batch_size, max_wait=0.0
    )
    for index, length in enumerate(backend.token_lengths(texts)):
        policy.add(index, length, 0.0)
    while (batch := policy.next_batch(0.0, flush=True)) is not None:
        out[batch.keys] = backend.embed([texts[i] for i in batch.keys])
    return out
