"""What every task of the worker is waiting on, for an operator who asks (``kill -USR1``): the
asyncio equivalent of a JVM's thread dump, written to the log as one line.

A worker that stops making progress without failing (a partition's commits stuck, documents
in flight that never finish) shows nothing in its log; a sampling profiler shows only the event
loop waiting in ``select``. The tasks' own stacks say which await each one sits in.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import Any

log = logging.getLogger(__name__)

# Frames per task: the innermost ones say what it waits on.
_FRAMES = 8


def awaiting(task: asyncio.Task[object]) -> str:
    """Where ``task`` is suspended, outermost first: each coroutine and the line of its
    ``await``, down to the innermost, then what that one awaits (a future, a sleep)."""
    parts: list[str] = []
    current: Any = task.get_coro()
    while current is not None and len(parts) < _FRAMES:
        frame = getattr(current, "cr_frame", None) or getattr(current, "gi_frame", None)
        if frame is None:
            parts.append(type(current).__name__)  # a future, a task, a sleep
            break
        where = frame.f_code.co_filename.rsplit("/site-packages/", 1)[-1]
        parts.append(f"{frame.f_code.co_name} ({where.rsplit('/worker/', 1)[-1]}:{frame.f_lineno})")
        current = getattr(current, "cr_await", None) or getattr(current, "gi_yieldfrom", None)
    return " > ".join(parts) or "running"


def task_stacks() -> Counter[str]:
    """Each distinct place the running loop's tasks wait at, and how many wait there: hundreds
    of documents waiting on the same await are one line."""
    return Counter(awaiting(task) for task in asyncio.all_tasks())


def log_task_dump() -> None:
    stacks = task_stacks()
    log.warning(
        "task dump",
        extra={
            "tasks": sum(stacks.values()),
            "stacks": [f"{n} × {s}" for s, n in stacks.most_common()],
        },
    )
