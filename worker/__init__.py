"""chunkstream: a streaming document-chunking worker for RAG ingestion pipelines.

The public surface for library users (pinned by tests/architecture/test_public_api.py):

- :data:`__version__`;
- :class:`Settings` and :func:`load_settings` (env ``CHUNKSTREAM_*`` and flags, validated);
- :class:`Chunk` and :func:`build` (a strategy by name, built as the worker builds it: with
  the models :func:`build_context` resolves, as the worker and ``chunkstream chunk`` resolve
  them, so it cuts the worker's chunks; see :mod:`worker.chunking` for the strategies
  themselves, their parameters and the registry's errors);
- :func:`build_context`: the worker's default model references for a strategy (boundary and
  retrieval ``ModelRef``), to build with or to hand to :func:`open_batcher`;
- :func:`chunk_document` / :func:`chunk_document_sync`: one document through a built strategy,
  the dispatch the worker and the CLI use;
- :func:`open_batcher`: the model behind a token-bounded micro-batcher, from settings;
- :class:`Worker`: the Kafka worker itself (``await Worker(settings).run()``).

Names are imported on first use: ``import worker`` stays cheap and loads neither aiokafka nor
onnxruntime.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from worker._version import __version__

if TYPE_CHECKING:
    from worker.app import Worker
    from worker.chunking.types import Chunk
    from worker.config import Settings, load_settings
    from worker.inference.serving import build_context, open_batcher
    from worker.inference.serving import build_strategy as build
    from worker.pipeline import chunk_document, chunk_document_sync

_WHERE = {
    "Chunk": "worker.chunking.types",
    "Settings": "worker.config",
    "Worker": "worker.app",
    "build": "worker.inference.serving",
    "build_context": "worker.inference.serving",
    "chunk_document": "worker.pipeline",
    "chunk_document_sync": "worker.pipeline",
    "load_settings": "worker.config",
    "open_batcher": "worker.inference.serving",
}

__all__ = [
    "Chunk",
    "Settings",
    "Worker",
    "__version__",
    "build",
    "build_context",
    "chunk_document",
    "chunk_document_sync",
    "load_settings",
    "open_batcher",
]


# Public names that are another name where they live.
_AS = {"build": "build_strategy"}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'worker' has no attribute {name!r}")
    return getattr(importlib.import_module(where), _AS.get(name, name))


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
