"""Worker processes as the tests signal them."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path


def catches(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler for ``signum`` (its SigCgt mask)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    for line in status.splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    return False


async def until_catching(proc: subprocess.Popen[bytes], signum: int, timeout_s: float = 60) -> None:
    """Until ``proc`` handles ``signum`` (or has exited): a signal sent earlier would find the
    interpreter still starting, before any code of ours could catch it, and end it with the
    signal's default action."""
    for _ in range(int(timeout_s * 100)):
        if proc.poll() is not None or catches(proc.pid, signum):
            return
        await asyncio.sleep(0.01)
    raise TimeoutError(f"pid {proc.pid} never caught signal {signum}")
