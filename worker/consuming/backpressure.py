"""When the consumer pauses its partitions and when it resumes them: numbers in, a verdict out.

Invariants:

- Pause as soon as any high mark is reached: in-flight documents, in-flight input bytes, or
  the embedding queue over its own high watermark.
- Resume only when every one of them is back down: documents and bytes at or below
  ``low_fraction`` of their marks and the embedding queue no longer over its mark (the
  batcher's watermark has its own hysteresis, so it is read as it is).
- Between the two marks nothing changes (hysteresis: no flapping at one threshold).
- Pure: no clock, no Kafka; the consume loop applies the verdict to the consumer.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


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
