"""The restore tasks of assigned partitions (worker.state.restores): one task an assignment, a
revocation leaves the partitions that stay a task of their own, a restart runs its reset first,
and at shutdown every task is cancelled and waited for and none starts after."""

from __future__ import annotations

import asyncio

from worker.state.restores import Restores


class Recorder:
    def __init__(self) -> None:
        self.done: list[list[str]] = []
        self.started: list[list[str]] = []
        self.gate = asyncio.Event()

    async def restore(self, tps: list[str]) -> None:
        self.started.append(sorted(tps))
        await self.gate.wait()
        self.done.append(sorted(tps))


async def test_a_revoked_partition_leaves_the_others_a_restore_of_their_own() -> None:
    recorder = Recorder()
    restores: Restores[str] = Restores(recorder.restore)
    restores.start(["a", "b", "c"])
    await asyncio.sleep(0)
    restores.revoke(["b"])
    await asyncio.sleep(0)
    recorder.gate.set()
    await asyncio.sleep(0.01)
    assert recorder.started == [["a", "b", "c"], ["a", "c"]]
    assert recorder.done == [["a", "c"]]


async def test_a_restart_resets_then_restores() -> None:
    recorder = Recorder()
    restores: Restores[str] = Restores(recorder.restore)
    resets: list[set[str]] = []

    async def reset(tps: set[str]) -> None:
        resets.append(tps)

    recorder.gate.set()
    restores.restart(["a"], reset)
    await asyncio.sleep(0.01)
    assert resets == [{"a"}]
    assert recorder.done == [["a"]]


async def test_at_shutdown_restores_end_and_none_starts_after() -> None:
    recorder = Recorder()
    restores: Restores[str] = Restores(recorder.restore)
    restores.start(["a"])
    await asyncio.sleep(0)
    await asyncio.wait_for(restores.stop(), 5)  # the running one cancelled, and waited for
    restores.start(["b"])  # an assignment during the drain
    recorder.gate.set()
    await asyncio.sleep(0.01)
    assert recorder.started == [["a"]]
    assert recorder.done == []
