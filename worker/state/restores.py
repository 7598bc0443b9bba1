"""The state restore tasks of the consume loop's assigned partitions (worker.consuming.loop).

Invariants:

- One task restores a whole assignment: the changelog reads an assignment's partitions
  together (worker.state.changelog), one offsets request each way and one fetch stream.
- A revoke cancels the task of every revoked partition; the partitions that shared it and stay
  owned get a task of their own, so no owned partition is left paused without a restore.
- At shutdown every restore is cancelled and waited for, and none starts after: the state
  store closes once the worker stops, and a restore running then would fail on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Hashable, Iterable
from typing import Any, Generic, TypeVar

# A partition as the caller names it (the loop: aiokafka's TopicPartition; Kafka stays there).
P = TypeVar("P", bound=Hashable)


RestoreFn = Callable[[list[P]], Coroutine[Any, Any, None]]


class Restores(Generic[P]):
    def __init__(self, restore: RestoreFn[P]) -> None:
        self._restore = restore
        self._tasks: dict[P, asyncio.Task[None]] = {}
        self._how: dict[asyncio.Task[None], RestoreFn[P]] = {}  # what each task runs
        self._stopped = False  # shutdown: no restore starts any more

    def start(self, partitions: Iterable[P]) -> None:
        self._launch(list(partitions), self._restore)

    def restart(
        self, partitions: Iterable[P], reset: Callable[[set[P]], Coroutine[Any, Any, None]]
    ) -> None:
        """Restore ``partitions`` again, once ``reset`` (awaited first, in the same task) has
        put them back as they were at their last commit; a revocation meanwhile cancels both,
        and the partitions that stay are reset and restored by a task of their own."""

        async def again(batch: list[P]) -> None:
            await reset(set(batch))
            await self._restore(batch)

        self._launch(list(partitions), again)

    def _launch(self, tps: list[P], how: RestoreFn[P]) -> None:
        if self._stopped:
            return
        task = asyncio.create_task(self._run(tps, how))
        self._how[task] = how
        task.add_done_callback(self._how.pop)
        for tp in tps:
            self._tasks[tp] = task

    def revoke(self, revoked: Iterable[P]) -> None:
        tasks = {self._tasks.pop(tp) for tp in revoked if tp in self._tasks}
        for task in tasks:
            task.cancel()
        kept: dict[asyncio.Task[None], list[P]] = {}
        for tp, task in self._tasks.items():
            if task in tasks:
                kept.setdefault(task, []).append(tp)
        for task, tps in kept.items():
            self._launch(tps, self._how.get(task, self._restore))

    async def stop(self) -> None:
        """Shutdown: cancel every restore and wait for them to end; none starts after (an
        assignment can still arrive while the worker drains, and the state store closes once
        the worker has stopped)."""
        self._stopped = True
        tasks = set(self._tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    async def _run(self, tps: list[P], restore: RestoreFn[P]) -> None:
        try:
            await restore(tps)
        finally:
            for tp in tps:
                if self._tasks.get(tp) is asyncio.current_task():
                    del self._tasks[tp]
