"""Waits with a way out, for the shutdown and the rebalance paths of the consume loop: a
wait that Kafka going away, or a stop request, ends early (the pod's grace period is short,
and waiting for what cannot happen only eats it)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")
K = TypeVar("K")
F = TypeVar("F", bound="asyncio.Future[Any]")

log = logging.getLogger(__name__)

# How often a wait looks at its way out.
SLICE_S = 0.25


async def wait_while(tasks: set[F], deadline_s: float, worth_it: Callable[[], bool]) -> set[F]:
    """Wait for ``tasks`` (or futures) up to ``deadline_s``, in slices, while ``worth_it()``
    holds; the ones still pending when it stops (not cancelled here)."""
    deadline = time.monotonic() + deadline_s
    pending = set(tasks)
    while pending and worth_it():
        left = deadline - time.monotonic()
        if left <= 0:
            break
        _, pending = await asyncio.wait(pending, timeout=min(left, SLICE_S))
    return pending


async def finish_or_cancel(
    tasks: dict[asyncio.Task[Any], K], deadline_s: float, worth_it: Callable[[], bool]
) -> set[K]:
    """:func:`wait_while` on ``tasks``, then cancel those still pending (logged as abandoned)
    and wait for them to end; the keys of the cancelled ones."""
    if not tasks:
        return set()
    pending = await wait_while(set(tasks), deadline_s, worth_it)
    for task in pending:
        task.cancel()
    if pending:
        reason = "drain deadline passed" if worth_it() else "kafka unreachable: drain"
        log.warning(reason, extra={"abandoned": len(pending)})
        await asyncio.wait(pending)
    return {tasks[task] for task in pending}


async def unless_set(work: Awaitable[T], event: asyncio.Event) -> T | None:
    """``work``'s result, or None (``work`` cancelled) if ``event`` is set first."""
    task = asyncio.ensure_future(work)
    stop = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return None
