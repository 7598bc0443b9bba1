"""worker.runtime.garbage_collector: start-up objects frozen out of collections, cycles made
later still collected."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from worker.runtime import garbage_collector


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture
def restored_gc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A process that has not settled yet, and the collector as it was afterwards."""
    monkeypatch.setattr(garbage_collector, "_settled", False)
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_settle_freezes_what_is_alive_and_raises_the_young_threshold(restored_gc: None) -> None:
    loaded = [Node()]  # alive at start-up, like a module's objects
    garbage_collector.settle()
    expected = (garbage_collector.YOUNG_THRESHOLD, *garbage_collector.OLDER_THRESHOLDS)
    assert gc.get_threshold() == expected
    assert gc.get_freeze_count() > 0
    # The permanent generation is outside every generation a collection scans.
    assert not any(o is loaded for o in gc.get_objects())
    later = [Node()]
    assert any(o is later for o in gc.get_objects())


def test_a_cycle_made_after_settle_is_collected_without_being_asked(restored_gc: None) -> None:
    garbage_collector.settle()
    a, b = Node(), Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    del a, b
    assert gone() is not None  # only a collection frees a cycle
    # Enough young containers to pass the raised threshold a few times over.
    keep = [[i] for i in range(3 * garbage_collector.YOUNG_THRESHOLD)]
    assert len(keep) == 3 * garbage_collector.YOUNG_THRESHOLD
    assert gone() is None


def test_settle_acts_once_per_process(restored_gc: None) -> None:
    garbage_collector.settle()
    frozen = gc.get_freeze_count()
    finished_worker = [Node()]  # alive when a second worker of the same process starts
    garbage_collector.settle()
    assert gc.get_freeze_count() == frozen
    assert any(o is finished_worker for o in gc.get_objects())  # still collectable
