"""worker.pipeline, the one chunking dispatch: which path a document takes (the registry's
``needs_model``), one embed call per document through the caller's function, the same chunks
from the async and the synchronous dispatch, a clear refusal without a model, and large
documents chunked off the event loop, small ones inline, whatever the speed.

The offload checks read no clock: a rule strategy that only proceeds once the event loop has run
a callback scheduled from inside it proves the loop kept running during the chunking (on the
loop thread that callback could never run, and the wait times out); the thread the strategy ran
on is recorded as well. The same dispatch on a real broker and model: tests/broker/
test_pipeline_parity.py.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import numpy as np
import pytest
from numpy.typing import NDArray

from tests.support.fake_embedder import RecordingEmbedder, topic_document
from tests.support.fake_embedder import embed as hashed_embed
from worker.chunking import registry
from worker.chunking.types import Chunk, ContentType
from worker.pipeline import (
    THREAD_CHUNKING_CHARS,
    ModelRequired,
    assemble_with,
    chunk_document,
    chunk_document_sync,
)


class GatedChunker:
    """Records whether the loop could run while ``chunk`` was in progress, and where it ran."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.loop_ran_meanwhile: bool | None = None
        self.thread: threading.Thread | None = None

    def chunk(self, text: str, *, content_type: ContentType = "text/plain") -> list[Chunk]:
        self.thread = threading.current_thread()
        if self.thread is threading.main_thread():
            # Inline on the loop thread: the loop cannot run until we return; do not wait.
            self.loop_ran_meanwhile = False
        else:
            ran = threading.Event()
            self._loop.call_soon_threadsafe(ran.set)
            self.loop_ran_meanwhile = ran.wait(timeout=60)
        return [Chunk(text, 0, len(text), len(text), "gated")]


def built_with(chunker: GatedChunker) -> registry.BuiltStrategy:
    return registry.BuiltStrategy("gated", chunker, needs_model=False, fingerprint="x")


async def test_a_large_document_is_chunked_on_another_thread_while_the_loop_runs() -> None:
    assert threading.current_thread() is threading.main_thread()  # the loop's thread
    chunker = GatedChunker(asyncio.get_running_loop())
    size = THREAD_CHUNKING_CHARS
    chunks = await chunk_document(built_with(chunker), "x" * size, "text/plain", None)
    assert chunks[0].end_index == size
    assert chunker.thread is not threading.main_thread()
    assert chunker.loop_ran_meanwhile


async def test_a_small_document_is_chunked_inline() -> None:
    chunker = GatedChunker(asyncio.get_running_loop())
    size = THREAD_CHUNKING_CHARS - 1
    chunks = await chunk_document(built_with(chunker), "x" * size, "text/plain", None)
    assert chunks[0].end_index == size
    assert chunker.thread is threading.main_thread()


TEXT, _ = topic_document(["cooking", "astronomy", "finance", "sailing"], per_topic=6)


async def test_a_rule_strategy_is_its_chunkers_chunk_async_and_sync_alike() -> None:
    built = registry.build("sentence", {"chunk_size": "40"})
    assert not built.needs_model
    direct = built.chunker.chunk(TEXT, content_type="text/plain")  # type: ignore[union-attr]
    assert len(direct) > 2
    assert await chunk_document(built, TEXT, "text/plain", None) == direct
    assert chunk_document_sync(built, TEXT, "text/plain", None) == direct


async def test_an_embedding_strategy_plans_embeds_once_then_assembles() -> None:
    """Every text of the plan goes to the caller's embed function in one call, in plan order;
    the async and synchronous dispatch give the same chunks for the same vectors."""
    built = registry.build("semantic", {"chunk_size": "60"})
    assert built.needs_model
    recorded = RecordingEmbedder()

    async def embed(texts: Sequence[str]) -> NDArray[np.float32]:
        return recorded(texts)

    chunks = await chunk_document(built, TEXT, "text/plain", embed)
    plan = built.chunker.plan(TEXT, content_type="text/plain")  # type: ignore[union-attr]
    assert recorded.calls == [list(plan.texts)]
    assert chunk_document_sync(built, TEXT, "text/plain", hashed_embed) == chunks
    assert [c.text for c in chunks] == [TEXT[c.start_index : c.end_index] for c in chunks]
    assert len(chunks) > 1


async def test_an_embedding_strategy_without_a_model_is_refused_naming_it() -> None:
    built = registry.build("semantic", {})
    with pytest.raises(ModelRequired, match="'semantic' needs the embedding model"):
        await chunk_document(built, TEXT, "text/plain", None)
    with pytest.raises(ModelRequired, match="'semantic' needs the embedding model"):
        chunk_document_sync(built, TEXT, "text/plain", None)


class BothShapes:
    """A chunker that has the rule shape and the embedding shape: the registry decides."""

    def __init__(self) -> None:
        self.called: list[str] = []

    def chunk(self, text: str, *, content_type: ContentType = "text/plain") -> list[Chunk]:
        self.called.append("chunk")
        return [Chunk(text, 0, len(text), 1, "both")]

    def plan(self, text: str, *, content_type: ContentType = "text/plain") -> object:
        self.called.append("plan")
        raise AssertionError("planned although the registry says it needs no model")


async def test_the_path_is_the_registrys_needs_model_not_the_chunkers_shape() -> None:
    chunker = BothShapes()
    built = registry.BuiltStrategy("both", chunker, needs_model=False, fingerprint="x")

    async def embed(texts: Sequence[str]) -> NDArray[np.float32]:
        raise AssertionError("embedded for a rule strategy")

    assert await chunk_document(built, "abc", "text/plain", embed) == [
        Chunk("abc", 0, 3, 1, "both")
    ]
    assert chunk_document_sync(built, "abc", "text/plain", hashed_embed)[0].text == "abc"
    assert chunker.called == ["chunk", "chunk"]


async def test_assemble_with_hands_the_plans_vectors_to_assemble_in_order() -> None:
    built = registry.build("semantic", {"chunk_size": "60"})
    chunker = built.chunker
    seen: list[int] = []

    async def embed(texts: Sequence[str]) -> NDArray[np.float32]:
        seen.append(len(texts))
        return hashed_embed(texts)

    chunks = await assemble_with(chunker, TEXT, "text/plain", embed)  # type: ignore[arg-type]
    assert seen == [len(chunker.plan(TEXT, content_type="text/plain").texts)]  # type: ignore[union-attr]
    assert chunks == chunk_document_sync(built, TEXT, "text/plain", hashed_embed)
