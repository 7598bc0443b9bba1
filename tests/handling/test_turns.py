"""Records of one document are handled one at a time, in arrival order (worker.handling.turns)."""

from __future__ import annotations

import asyncio

from worker.handling.turns import DocumentTurns


async def test_one_documents_records_run_in_arrival_order_others_run_alongside() -> None:
    turns = DocumentTurns()
    log: list[str] = []
    gates = {name: asyncio.Event() for name in ("a1", "a2", "b1")}

    async def handle(key: str, name: str) -> None:
        async with turns.turn(key):
            log.append(f"start {name}")
            await gates[name].wait()
            log.append(f"end {name}")

    tasks = [
        asyncio.create_task(handle("a", "a1")),
        asyncio.create_task(handle("a", "a2")),
        asyncio.create_task(handle("b", "b1")),
    ]
    await asyncio.sleep(0.01)
    # a2 waits for a1 although it is free to go; b1 (another document) runs at once.
    assert log == ["start a1", "start b1"]
    gates["a2"].set()
    await asyncio.sleep(0.01)
    assert "start a2" not in log
    gates["a1"].set()
    gates["b1"].set()
    await asyncio.gather(*tasks)
    assert log.index("end a1") < log.index("start a2")
    assert len(turns) == 0  # nothing in flight costs nothing


async def test_a_cancelled_record_lets_the_next_one_go_without_cancelling_it() -> None:
    turns = DocumentTurns()
    started = asyncio.Event()
    ran: list[str] = []

    async def first() -> None:
        async with turns.turn("doc"):
            started.set()
            await asyncio.sleep(3600)

    async def second() -> None:
        async with turns.turn("doc"):
            ran.append("second")

    one = asyncio.create_task(first())
    await started.wait()
    two = asyncio.create_task(second())
    await asyncio.sleep(0.01)
    assert ran == []
    one.cancel()
    await two
    assert ran == ["second"]
    assert one.cancelled()


async def test_no_key_means_no_order() -> None:
    turns = DocumentTurns()
    async with turns.turn(None), turns.turn(None):
        assert len(turns) == 0
