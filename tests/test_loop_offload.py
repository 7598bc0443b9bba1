"""Large documents are chunked off the event loop, small ones inline — whatever the speed.

No clock is read: a rule strategy that only proceeds once the event loop has run a callback
scheduled from inside it proves the loop kept running during the chunking (on the loop thread
that callback could never run, and the wait times out); the thread the strategy ran on is
recorded as well.
"""

from __future__ import annotations

import asyncio
import threading

from worker.chunking import registry
from worker.chunking.types import Chunk, ContentType
from worker.pipeline import THREAD_CHUNKING_CHARS, chunk_document


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
