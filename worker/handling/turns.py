"""One document at a time: records of the same document are handled in the order they arrived.

The worker handles many documents of a partition at once, but two versions of one document (or
a version and its tombstone) must not overtake each other: the second reads the state the first
writes. :meth:`DocumentTurns.turn` is entered in arrival order — the consume loop starts the
handling tasks in offset order, and a task claims its turn in its first step, before anything
suspends it — and each waits for the turn before it to end, however that one ends (done,
failed or cancelled: a cancelled record is replayed later, and the lifecycle's offset rule
keeps the replay from undoing what came after it).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Hashable


class DocumentTurns:
    """Per-key FIFO of the records in flight; a key with nothing in flight costs nothing."""

    def __init__(self) -> None:
        self._last: dict[Hashable, asyncio.Future[None]] = {}

    def __len__(self) -> int:
        return len(self._last)

    @contextlib.asynccontextmanager
    async def turn(self, key: Hashable | None) -> AsyncIterator[None]:
        """Wait for the records of ``key`` that arrived before, then run (None: no order)."""
        if key is None:
            yield
            return
        before = self._last.get(key)
        mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._last[key] = mine  # claimed synchronously: arrival order
        try:
            if before is not None:
                # Shielded: cancelling this record must not cancel the wait of the next one.
                await asyncio.shield(before)
            yield
        finally:
            mine.set_result(None)
            if self._last.get(key) is mine:
                del self._last[key]
