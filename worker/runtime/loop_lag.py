"""How late the event loop runs: a timer that should fire every ``tick_s`` measures its delay.

Invariants:

- A sample is how much later than ``tick_s`` the timer fired (never negative): the time
  something held the loop (pure-Python work, a blocking call), which would also have delayed
  Kafka heartbeats and ``/healthz``.
- The gauge is the worst sample of the last ``window_s`` seconds; the histogram keeps all.
"""

from __future__ import annotations

import asyncio
from collections import deque

from worker.observability.metrics import Metrics

TICK_S = 0.1
WINDOW_S = 10.0


class LagWindow:
    """The worst of the last ``size`` samples (pure)."""

    def __init__(self, size: int) -> None:
        self._samples: deque[float] = deque(maxlen=max(1, size))

    def add(self, lag: float) -> float:
        """Record one sample; returns the window's maximum."""
        self._samples.append(lag)
        return max(self._samples)


async def watch_loop_lag(metrics: Metrics, tick_s: float = TICK_S) -> None:
    """Sample forever (cancel to stop)."""
    loop = asyncio.get_running_loop()
    window = LagWindow(int(WINDOW_S / tick_s))
    while True:
        before = loop.time()
        await asyncio.sleep(tick_s)
        lag = max(0.0, loop.time() - before - tick_s)
        metrics.loop_lag.observe(lag)
        metrics.loop_lag_max.set(window.add(lag))
