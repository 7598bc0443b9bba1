"""Waits with a way out, for the shutdown and the rebalance paths of the consume loop: a
wait that Kafka going away, or a stop request, ends early (the pod's grace period is short,
and waiting for what cannot happen only eats it)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")
F = TypeVar("F", bound="asyncio.Future[Any]")

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
