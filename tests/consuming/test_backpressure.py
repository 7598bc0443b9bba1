"""The pause/resume decision, with numbers (no clock, no Kafka)."""

from __future__ import annotations

from worker.consuming.backpressure import Backpressure, PauseDigest, Verdict


def test_pauses_at_any_high_mark_and_resumes_only_below_every_low_mark() -> None:
    bp = Backpressure(max_documents=10, max_bytes=1000)
    assert bp.update(9, 999, queue_full=False) is Verdict.KEEP
    assert bp.update(10, 0, queue_full=False) is Verdict.PAUSE
    assert bp.paused
    # Between the marks: stay paused (hysteresis).
    assert bp.update(6, 100, queue_full=False) is Verdict.KEEP
    # Documents low, bytes still above half: stay paused.
    assert bp.update(5, 501, queue_full=False) is Verdict.KEEP
    assert bp.update(5, 500, queue_full=True) is Verdict.KEEP  # the queue still full
    assert bp.update(5, 500, queue_full=False) is Verdict.RESUME
    assert not bp.paused
    assert bp.update(5, 500, queue_full=False) is Verdict.KEEP


def test_bytes_and_the_embedding_queue_pause_on_their_own() -> None:
    bp = Backpressure(max_documents=10, max_bytes=1000)
    assert bp.update(1, 1000, queue_full=False) is Verdict.PAUSE
    assert bp.update(0, 0, queue_full=False) is Verdict.RESUME
    assert bp.update(0, 0, queue_full=True) is Verdict.PAUSE
    assert bp.update(0, 0, queue_full=True) is Verdict.KEEP  # already paused: no second pause
    assert bp.update(0, 0, queue_full=False) is Verdict.RESUME


def test_the_low_mark_is_a_fraction_of_the_high_one() -> None:
    bp = Backpressure(max_documents=100, max_bytes=10_000, low_fraction=0.25)
    assert bp.update(100, 0, queue_full=False) is Verdict.PAUSE
    assert bp.update(26, 0, queue_full=False) is Verdict.KEEP
    assert bp.update(25, 2500, queue_full=False) is Verdict.RESUME


def test_pauses_are_summed_up_once_a_period_and_not_while_none_happen() -> None:
    digest = PauseDigest(every_s=60.0)
    digest.note(Verdict.KEEP, 0.0)
    for start in (1.0, 10.0, 20.0):
        digest.note(Verdict.PAUSE, start)
        digest.note(Verdict.RESUME, start + 2.0)
    assert digest.summary(59.0) is None  # the period is not over
    assert digest.summary(60.0) == {"pauses": 3, "paused_s": 6.0, "period_s": 60.0}
    assert digest.summary(130.0) is None  # a quiet minute says nothing
    digest.note(Verdict.PAUSE, 170.0)  # still paused when the period ends: counted up to it
    assert digest.summary(190.0) == {"pauses": 1, "paused_s": 20.0, "period_s": 60.0}
    digest.note(Verdict.RESUME, 195.0)
    assert digest.summary(196.0, final=True) == {"pauses": 0, "paused_s": 5.0, "period_s": 6.0}
