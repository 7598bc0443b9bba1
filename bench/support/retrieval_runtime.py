"""The worker's models for the retrieval benchmark: the two roles, resolved as the worker does.

The boundary model places the embedding strategies' cuts; the retrieval model embeds chunks and
questions. Both are resolved by ``worker.inference.serving.resolve`` (the worker's own model
references: strategies get both roles in their ``BuildContext`` and size chunks in the retrieval
model's tokens) and served by the worker's ``open_batcher`` from inference settings read like an
offline command's (``CHUNKSTREAM_*`` inference variables apply), so every batch is bounded as in the
worker.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

from worker.chunking import registry
from worker.inference.batcher import Batcher

BatcherFactory = Callable[[], contextlib.AbstractAsyncContextManager[Batcher]]


@dataclass(frozen=True)
class Runtime:
    context: registry.BuildContext  # what strategies are built with
    boundary_dir: Path
    retrieval_dir: Path
    retrieval_tokenizer: Path
    window: int  # tokens of text the retrieval model reads ([CLS]/[SEP] excluded)
    open_boundary: BatcherFactory
    open_retrieval: BatcherFactory


def resolve_models(boundary: str | None, retrieval: str | None) -> Runtime:
    """The two roles: the named directories, else the worker's defaults."""
    from worker.inference import serving as inference

    settings = inference.inference_settings(model_dir=boundary, retrieval_model_dir=retrieval)
    refs = inference.resolve(settings, boundary=True, retrieval=True)
    assert refs.boundary is not None
    assert refs.retrieval is not None
    boundary_ref, retrieval_ref = refs.boundary, refs.retrieval
    return Runtime(
        context=registry.BuildContext(boundary=boundary_ref, retrieval=retrieval_ref),
        boundary_dir=boundary_ref.directory,
        retrieval_dir=retrieval_ref.directory,
        retrieval_tokenizer=retrieval_ref.tokenizer,
        window=retrieval_ref.window or 1 << 20,
        open_boundary=lambda: inference.open_batcher(settings, model=boundary_ref),
        open_retrieval=lambda: inference.open_batcher(settings, model=retrieval_ref),
    )


@contextlib.asynccontextmanager
async def batchers(runtime: Runtime) -> AsyncIterator[tuple[Batcher, Batcher]]:
    """The boundary and the retrieval batcher, running."""
    async with runtime.open_boundary() as boundary, runtime.open_retrieval() as retrieval:
        yield boundary, retrieval
