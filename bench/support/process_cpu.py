"""Another process's CPU over a span of time: the broker's share of a benchmark pass.

A pass (the worker's or the peer's, in a child process) reports its clock's span in
``time.monotonic()`` seconds (CLOCK_MONOTONIC: the same clock in every process on the
machine). Meanwhile :class:`CpuSampler` reads the broker's ``/proc/PID/stat`` (user + system
ticks of every thread) every few milliseconds in a thread of the parent; :meth:`cpu_between`
interpolates the samples at the span's ends, so the broker's CPU is counted over exactly the
pass's clock and not over its start-up, group join or shutdown.

Why: at one core each the broker has one core too, and what it spends per input MB bounds the
MB/s of whatever feeds it (``1 / broker CPU-s per MB`` when its core is fully busy), whatever
the client does. The peer and the worker send different records for the same input, so that
bound differs between them.
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from pathlib import Path
from types import TracebackType

_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def process_ticks(pid: int) -> int:
    """User + system CPU ticks of every thread of ``pid`` so far."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    # The command name (field 2) may hold spaces: count the fields after its closing paren.
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15 of the whole


class CpuSampler:
    """Samples ``pid``'s CPU every ``interval_s`` while open (a context manager)."""

    def __init__(self, pid: int, interval_s: float = 0.01) -> None:
        self.pid = pid
        self.interval_s = interval_s
        self.times: list[float] = []
        self.ticks: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> CpuSampler:
        self._sample()
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def _sample(self) -> None:
        ticks = process_ticks(self.pid)
        moment = time.monotonic()
        # Ticks first: a reader in another thread never sees a time without its ticks.
        self.ticks.append(ticks)
        self.times.append(moment)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def _at(self, moment: float) -> float:
        """Ticks at ``moment``, interpolated between the samples around it."""
        times, ticks = self.times, self.ticks
        if moment <= times[0]:
            return float(ticks[0])
        if moment >= times[-1]:
            return float(ticks[-1])
        right = bisect.bisect_left(times, moment)
        left = right - 1
        share = (moment - times[left]) / (times[right] - times[left])
        return ticks[left] + share * (ticks[right] - ticks[left])

    def cpu_between(self, start: float, end: float) -> float:
        """CPU seconds ``pid`` spent between two ``time.monotonic()`` moments."""
        if not self.times or start < self.times[0] or end > self.times[-1]:
            raise ValueError("the span is outside the sampled time")
        return (self._at(end) - self._at(start)) / _TICKS_PER_S
