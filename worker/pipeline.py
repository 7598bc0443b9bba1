"""One document through one strategy: the only copy of the chunking dispatch.

Invariants:

- Which path a document takes is the registry's ``needs_model``, never the chunker's shape:
  embedding strategies run ``plan`` → embed → ``assemble``; rule strategies run ``chunk``.
- This is the only place that embeds for chunking: the embedding chunkers plan and assemble,
  they never call a model (:func:`assemble_with` / :func:`assemble_with_sync` are the step
  for a caller holding a chunker rather than a built strategy, e.g. a test).
- Every vector comes from the caller's ``embed``. The worker, ``chunkstream chunk``,
  ``chunkstream embed`` and the benches all pass a :class:`worker.inference.batcher.Batcher`'s
  ``submit`` (built by :mod:`worker.inference.serving` from the same settings), so inference
  batches are bounded by ``max_batch_tokens`` for every caller: no caller hands a whole
  document to the model in one call.
- A rule strategy on a large document (:data:`THREAD_CHUNKING_CHARS` or more) runs on a worker
  thread, so the event loop (Kafka heartbeats, commits, other documents) keeps running.
- Same strategy, same text, same vectors → the same chunks, whoever the caller.

:func:`chunk_document_sync` is the same dispatch for synchronous library callers (and the
benches that time inference on their own): the embed function is then a plain call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import cast

import numpy as np
from numpy.typing import NDArray

from worker.chunking.registry import BuiltStrategy
from worker.chunking.types import Chunk, ContentType, EmbeddingChunker, RuleChunker

EmbedFn = Callable[[Sequence[str]], Awaitable[NDArray[np.float32]]]
"""Texts → ``[len(texts), dim]`` float32 rows in order (``Batcher.submit``)."""
SyncEmbedFn = Callable[[Sequence[str]], NDArray[np.float32]]

# Documents at least this long are chunked on a thread by the rule strategies: pure-Python
# chunking of a large document takes longer than the loop may be held (the consumer's
# heartbeat interval). Below it, a thread hop costs more than the chunking.
THREAD_CHUNKING_CHARS = 64 * 1024


class ModelRequired(RuntimeError):
    """An embedding strategy was called without an embed function."""


async def chunk_document(
    built: BuiltStrategy,
    text: str,
    content_type: ContentType,
    embed: EmbedFn | None,
) -> list[Chunk]:
    """The chunks of ``text`` by ``built``, embedding through ``embed`` when it needs a model."""
    if built.needs_model:
        return await assemble_with(
            _embedding_chunker(built, embed), text, content_type, cast(EmbedFn, embed)
        )
    rule = cast(RuleChunker, built.chunker)
    if len(text) >= THREAD_CHUNKING_CHARS:
        return await asyncio.to_thread(rule.chunk, text, content_type=content_type)
    return rule.chunk(text, content_type=content_type)


def chunk_document_sync(
    built: BuiltStrategy,
    text: str,
    content_type: ContentType,
    embed: SyncEmbedFn | None,
) -> list[Chunk]:
    """:func:`chunk_document` without an event loop (``embed`` is a blocking call)."""
    if built.needs_model:
        return assemble_with_sync(
            _embedding_chunker(built, embed), text, content_type, cast(SyncEmbedFn, embed)
        )
    return cast(RuleChunker, built.chunker).chunk(text, content_type=content_type)


async def assemble_with(
    chunker: EmbeddingChunker, text: str, content_type: ContentType, embed: EmbedFn
) -> list[Chunk]:
    """plan → embed (every text of the plan, in one call to ``embed``) → assemble."""
    plan = chunker.plan(text, content_type=content_type)
    return chunker.assemble(plan, await embed(list(plan.texts)))


def assemble_with_sync(
    chunker: EmbeddingChunker, text: str, content_type: ContentType, embed: SyncEmbedFn
) -> list[Chunk]:
    """:func:`assemble_with` with a blocking ``embed``."""
    plan = chunker.plan(text, content_type=content_type)
    return chunker.assemble(plan, embed(list(plan.texts)))


def _embedding_chunker(built: BuiltStrategy, embed: object) -> EmbeddingChunker:
    """``built``'s chunker as the embedding shape its registry entry says it has; refused
    (:class:`ModelRequired`) when the caller has no model to embed with."""
    if embed is None:
        raise ModelRequired(f"strategy {built.name!r} needs the embedding model")
    return cast(EmbeddingChunker, built.chunker)
