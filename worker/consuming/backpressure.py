"""When the consumer pauses its partitions and when it resumes them: numbers in, a verdict out.

Invariants:

- Pause as soon as any high mark is reached: in-flight documents, in-flight input bytes, or
  the embedding queue over its own high watermark.
- Resume only when every one of them is back down: documents and bytes at or below
  ``low_fraction`` of their marks and the embedding queue no longer over its mark (the
  batcher's watermark has its own hysteresis, so it is read as it is).
- Between the two marks nothing changes (hysteresis: no flapping at one threshold).
- Pure: no clock, no Kafka; the consume loop applies the verdict to the consumer.
- Pauses are routine under a burst (a healthy worker pauses many times a minute), so each is
  worth a debug line only; :class:`PauseDigest` sums them up for one info line at most every
  ``every_s`` seconds, and none while nothing paused.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Verdict(enum.Enum):
    KEEP = "keep"
    PAUSE = "pause"
    RESUME = "resume"


@dataclass
class Backpressure:
    """``update(...)`` after every fetch; ``paused`` is what the consumer should be now."""

    max_documents: int
    max_bytes: int
    low_fraction: float = 0.5
    paused: bool = False

    def update(self, documents: int, in_bytes: int, queue_full: bool) -> Verdict:
        if not self.paused:
            if documents >= self.max_documents or in_bytes >= self.max_bytes or queue_full:
                self.paused = True
                return Verdict.PAUSE
            return Verdict.KEEP
        if (
            documents <= self.max_documents * self.low_fraction
            and in_bytes <= self.max_bytes * self.low_fraction
            and not queue_full
        ):
            self.paused = False
            return Verdict.RESUME
        return Verdict.KEEP


@dataclass
class PauseDigest:
    """Pauses and time spent paused since the last summary (time passed in, in seconds)."""

    every_s: float = 60.0
    pauses: int = 0
    paused_s: float = 0.0
    _since: float | None = None  # start of the current period
    _paused_at: float | None = field(default=None, repr=False)

    def note(self, verdict: Verdict, now: float) -> None:
        if self._since is None:
            self._since = now
        if verdict is Verdict.PAUSE:
            self.pauses += 1
            self._paused_at = now
        elif verdict is Verdict.RESUME and self._paused_at is not None:
            self.paused_s += now - self._paused_at
            self._paused_at = None

    def summary(self, now: float, *, final: bool = False) -> dict[str, float] | None:
        """The period's figures once it is ``every_s`` long (or ``final``: at shutdown) and had
        a pause (then a new period starts); None otherwise."""
        if self._since is None or (now - self._since < self.every_s and not final):
            return None
        paused_s = self.paused_s
        if self._paused_at is not None:  # still paused: count up to now, go on from here
            paused_s += now - self._paused_at
            self._paused_at = now
        out = {"pauses": self.pauses, "paused_s": round(paused_s, 1), "period_s": now - self._since}
        had_pauses = self.pauses > 0 or paused_s > 0
        self._since, self.pauses, self.paused_s = now, 0, 0.0
        return out if had_pauses else None
