"""The task dump (``kill -USR1``): where each task waits, tasks waiting at the same place counted
once, in one log line."""

from __future__ import annotations

import asyncio
import logging

import pytest

from worker.observability.task_dump import log_task_dump, task_stacks


async def _inner(event: asyncio.Event) -> None:
    await event.wait()


async def _outer(event: asyncio.Event) -> None:
    await _inner(event)


async def test_tasks_waiting_at_the_same_await_are_one_entry_naming_the_chain(
    caplog: pytest.LogCaptureFixture,
) -> None:
    event = asyncio.Event()
    tasks = [asyncio.create_task(_outer(event)) for _ in range(3)]
    await asyncio.sleep(0)
    stacks = task_stacks()
    (waiting,) = [s for s in stacks if s.startswith("_outer")]
    assert stacks[waiting] == 3
    assert "_inner (" in waiting  # the chain down to the innermost coroutine
    assert "test_task_dump.py:15" in waiting  # the line of its await
    with caplog.at_level(logging.WARNING, logger="worker.observability.task_dump"):
        log_task_dump()
    (record,) = [r for r in caplog.records if r.getMessage() == "task dump"]
    assert record.tasks >= 4  # type: ignore[attr-defined]
    assert any(s.startswith("3 × _outer") for s in record.stacks)  # type: ignore[attr-defined]
    event.set()
    await asyncio.gather(*tasks)
