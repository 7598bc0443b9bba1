"""The state restore tasks of the consume loop's assigned partitions (worker.consuming.loop).

Invariants:

- One task restores a whole assignment: the changelog reads an assignment's partitions
  together (worker.state.changelog), one offsets request each way and one fetch stream.
- A revoke cancels the task of every revoked partition; the partitions that shared it and stay
  owned get a task of their own, so no owned partition is left paused without a restore.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Hashable, Iterable
from typing import Any, Generic, TypeVar

# A partition as the caller names it (the loop: aiokafka's TopicPartition; Kafka stays there).
P = TypeVar("P", bound=Hashable)


class Restores(Generic[P]):
    def __init__(self, restore: Callable[[list[P]], Coroutine[Any, Any, None]]) -> None:
        self._restore = restore
        self._tasks: dict[P, asyncio.Task[None]] = {}

    def start(self, partitions: Iterable[P]) -> None:
        tps = list(partitions)
        task = asyncio.create_task(self._run(tps))
        for tp in tps:
            self._tasks[tp] = task

    def revoke(self, revoked: Iterable[P]) -> None:
        tasks = {self._tasks.pop(tp) for tp in revoked if tp in self._tasks}
        for task in tasks:
            task.cancel()
        kept = {tp for tp, task in self._tasks.items() if task in tasks}
        if kept:
            self.start(kept)

    def cancel_all(self) -> None:
        for task in set(self._tasks.values()):
            task.cancel()

    async def _run(self, tps: list[P]) -> None:
        try:
            await self._restore(tps)
        finally:
            for tp in tps:
                if self._tasks.get(tp) is asyncio.current_task():
                    del self._tasks[tp]
