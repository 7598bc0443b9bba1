"""The loop-lag window, with numbers."""

from __future__ import annotations

from worker.runtime.loop_lag import LagWindow


def test_the_gauge_is_the_worst_of_the_last_samples_only() -> None:
    window = LagWindow(3)
    assert window.add(0.0) == 0.0
    assert window.add(0.5) == 0.5
    assert window.add(0.1) == 0.5
    assert window.add(0.2) == 0.5
    assert window.add(0.0) == 0.2  # 0.5 has left the window


def test_a_window_always_holds_at_least_one_sample() -> None:
    window = LagWindow(0)
    assert window.add(0.3) == 0.3
    assert window.add(0.1) == 0.1
