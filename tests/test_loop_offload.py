"""Large documents are chunked off the event loop, whatever the machine's speed."""

from __future__ import annotations

import asyncio
import time

from worker.chunking import registry
from worker.chunking.types import Chunk, ContentType
from worker.config import load_settings
from worker.service import Worker

BLOCK_S = 0.6


class SlowChunker:
    """Holds the thread for BLOCK_S, as a heavy pure-Python strategy would."""

    def chunk(self, text: str, *, content_type: ContentType = "text/plain") -> list[Chunk]:
        time.sleep(BLOCK_S)
        return [
            Chunk(
                text=text,
                start_index=0,
                end_index=len(text),
                token_count=len(text),
                strategy="slow",
            )
        ]


async def max_tick_lateness(work: asyncio.Future[object]) -> float:
    loop = asyncio.get_running_loop()
    worst = 0.0
    while not work.done():
        before = loop.time()
        await asyncio.sleep(0.02)
        worst = max(worst, loop.time() - before - 0.02)
    return worst


async def chunk_with(size: int) -> float:
    worker = Worker(load_settings({}, env={}))
    built = registry.BuiltStrategy("slow", SlowChunker(), needs_model=False, fingerprint="x")
    work = asyncio.ensure_future(worker._chunk(built, "x" * size, "text/plain"))
    lateness = await max_tick_lateness(work)
    assert (await work)[0].end_index == size
    return lateness


async def test_large_documents_leave_the_loop_free_small_ones_stay_inline() -> None:
    # A large document: the loop keeps ticking while the strategy works.
    assert await chunk_with(200_000) < BLOCK_S / 3
    # A small one runs inline (a thread hop would cost more than it saves) - and that
    # shows: this measurement is what would catch a large document run inline.
    assert await chunk_with(1_000) >= BLOCK_S * 0.9
