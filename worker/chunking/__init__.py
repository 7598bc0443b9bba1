"""Chunking: pure code that turns a document's text into offset-exact chunks.

The public surface for library users (pinned by tests/architecture/test_public_api.py)::

    from worker.chunking import build
    built = build("semantic", {"chunk_size": 800}, BuildContext(boundary=model_ref))

- the chunk types: :class:`Chunk`, :class:`Span`, ``ContentType``;
- the registry: :func:`build` (a name and loose parameters → a configured strategy with its
  fingerprint), :func:`names`, :class:`BuildContext` (the resolved model references:
  :func:`worker.inference.serving.resolve`), :class:`BuiltStrategy`, and its errors
  :class:`StrategyError` ⊃ :class:`NoSuchStrategy`, :class:`InvalidParameters`;
- each strategy's chunker and parameters: ``SentenceChunker``/``SentenceParams``,
  ``AdaptiveChunker``, ``LexicalChunker``, ``SemanticChunker``, ``SDPMChunker``,
  ``ContextChunker`` and their ``*Params``.

To run a built strategy on a document (embedding through a bounded batcher when it needs the
model) use :func:`worker.pipeline.chunk_document`, or ``chunk_document_sync``.

Rooms: ``text/`` (text analysis), ``rules/`` (strategies without a model), ``semantic/``
(strategies driven by sentence embeddings), ``_native/`` (the compiled cores, reached only
through the seam in its ``__init__``, all switched off by ``CHUNKSTREAM_PURE_PYTHON=1``);
``types.py`` and ``contract.py`` (what a strategy is) below ``strategies.py`` (the built-in
list) below ``registry.py`` at the top. Names are imported on first use, so importing one
submodule does not load every strategy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from worker.chunking.contract import (
        BuildContext,
        InvalidParameters,
        NoSuchStrategy,
        StrategyError,
    )
    from worker.chunking.registry import BuiltStrategy, build, names
    from worker.chunking.rules.adaptive import AdaptiveChunker, AdaptiveParams
    from worker.chunking.rules.lexical import LexicalChunker, LexicalParams
    from worker.chunking.rules.sentence import SentenceChunker, SentenceParams
    from worker.chunking.semantic.context import ContextChunker, ContextParams
    from worker.chunking.semantic.sdpm import SDPMChunker, SDPMParams
    from worker.chunking.semantic.semantic import SemanticChunker, SemanticParams
    from worker.chunking.types import Chunk, ContentType, Span

_WHERE = {
    "Chunk": "types",
    "ContentType": "types",
    "Span": "types",
    "BuildContext": "contract",
    "BuiltStrategy": "registry",
    "InvalidParameters": "contract",
    "NoSuchStrategy": "contract",
    "StrategyError": "contract",
    "build": "registry",
    "names": "registry",
    "SentenceChunker": "rules.sentence",
    "SentenceParams": "rules.sentence",
    "AdaptiveChunker": "rules.adaptive",
    "AdaptiveParams": "rules.adaptive",
    "LexicalChunker": "rules.lexical",
    "LexicalParams": "rules.lexical",
    "SemanticChunker": "semantic.semantic",
    "SemanticParams": "semantic.semantic",
    "SDPMChunker": "semantic.sdpm",
    "SDPMParams": "semantic.sdpm",
    "ContextChunker": "semantic.context",
    "ContextParams": "semantic.context",
}

__all__ = [
    "AdaptiveChunker",
    "AdaptiveParams",
    "BuildContext",
    "BuiltStrategy",
    "Chunk",
    "ContentType",
    "ContextChunker",
    "ContextParams",
    "InvalidParameters",
    "LexicalChunker",
    "LexicalParams",
    "NoSuchStrategy",
    "SDPMChunker",
    "SDPMParams",
    "SemanticChunker",
    "SemanticParams",
    "SentenceChunker",
    "SentenceParams",
    "Span",
    "StrategyError",
    "build",
    "names",
]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'worker.chunking' has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{where}"), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
