"""The garbage collector's settings for a worker that has started: what it loaded stays out of
every collection, and young objects are collected in larger steps.

Why: CPython's cyclic collector runs after every 700 net container allocations (threshold 0)
and scans the whole heap on every full collection. A worker allocates a few thousand containers
per document (records, events, futures), almost all freed by reference counting, so the
collector ran hundreds of times per pass over a corpus and took a visible share of the
event-loop thread's CPU (bench/event_path_bench.py). The modules, the models and the
client objects loaded at start-up live as long as the process; frozen, no collection scans them
again. Cycles (an exception's traceback, a failed task) are still collected, after 10,000
allocations instead of 700: a few documents later.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000
"""Net container allocations between two collections of the youngest generation."""
OLDER_THRESHOLDS = (10, 10)
"""CPython's defaults: collections of one generation between two of the next."""


_settled = False


def settle() -> None:
    """Collect once, move everything alive to the permanent generation, and raise the youngest
    generation's threshold. Call it once start-up is done (models loaded), before consuming.

    Once per process: a process that runs several workers one after another (the test suite,
    the benches) would otherwise freeze each finished worker's objects too, and a frozen cycle
    is never collected."""
    global _settled
    if _settled:
        return
    _settled = True
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *OLDER_THRESHOLDS)
