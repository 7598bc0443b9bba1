"""The worker's models for the retrieval benchmark: the two roles, resolved as the worker does.

The boundary model places the embedding strategies' cuts; the retrieval model embeds chunks and
questions. Both are served by the worker's ``open_batcher`` from inference settings read like
an offline command's (``CHUNKSTREAM_*`` inference variables apply), so every batch is bounded as
in the worker.

Two layouts of the worker package are understood, so that the benchmark runs before and after
the model-reference rework merges: ``worker.inference`` with ``ModelRef``s (strategies then get
both roles in their ``BuildContext`` and size chunks in the retrieval model's tokens), or
``worker.embedding.runtime`` with model directories (the boundary directory in the context).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worker.batcher import Batcher
from worker.chunking import registry

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
    # Asked of the context itself, not by trying an import: an editable install of another
    # checkout can make ``worker.inference`` importable beside this checkout's package.
    if "boundary" not in {f.name for f in dataclasses.fields(registry.BuildContext)}:
        return _directories(boundary, retrieval)
    from worker import inference  # type: ignore[attr-defined]

    settings = inference.inference_settings(model_dir=boundary, retrieval_model_dir=retrieval)
    refs = inference.resolve(settings, boundary=True, retrieval=True)
    context_args: dict[str, Any] = {"boundary": refs.boundary, "retrieval": refs.retrieval}
    return Runtime(
        context=registry.BuildContext(**context_args),
        boundary_dir=refs.boundary.directory,
        retrieval_dir=refs.retrieval.directory,
        retrieval_tokenizer=refs.retrieval.tokenizer,
        window=refs.retrieval.window,
        open_boundary=lambda: inference.open_batcher(settings, model=refs.boundary),
        open_retrieval=lambda: inference.open_batcher(settings, model=refs.retrieval),
    )


def _directories(boundary: str | None, retrieval: str | None) -> Runtime:
    import msgspec

    from worker.embedding.manifest import DEFAULT_MODEL_DIR, DEFAULT_STATIC_DIR
    from worker.embedding.runtime import inference_settings, open_batcher

    boundary_dir = Path(boundary) if boundary else DEFAULT_STATIC_DIR
    retrieval_dir = Path(retrieval) if retrieval else DEFAULT_MODEL_DIR
    boundary_settings = inference_settings(model_dir=str(boundary_dir))
    retrieval_settings = inference_settings(model_dir=str(retrieval_dir))
    manifest = msgspec.json.decode((retrieval_dir / "manifest.json").read_bytes())
    return Runtime(
        context=registry.BuildContext(model_dir=str(boundary_dir)),
        boundary_dir=boundary_dir,
        retrieval_dir=retrieval_dir,
        retrieval_tokenizer=retrieval_dir / "tokenizer.json",
        window=int(manifest["max_seq_length"]) - 2,  # [CLS] and [SEP]
        open_boundary=lambda: open_batcher(boundary_settings),
        open_retrieval=lambda: open_batcher(retrieval_settings),
    )


@contextlib.asynccontextmanager
async def batchers(runtime: Runtime) -> AsyncIterator[tuple[Batcher, Batcher]]:
    """The boundary and the retrieval batcher, running."""
    async with runtime.open_boundary() as boundary, runtime.open_retrieval() as retrieval:
        yield boundary, retrieval
