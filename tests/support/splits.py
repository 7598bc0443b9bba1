"""The two disjoint halves every evaluation set is cut into: ``tune``, where parameters are
chosen, and ``report``, held out and only measured once a choice is made. One definition for
the seam sets (tests/support/seams.py) and the retrieval set
(bench/support/qa_dataset.py)."""

from __future__ import annotations

from typing import Literal

Split = Literal["tune", "report"]
SPLITS: tuple[Split, ...] = ("tune", "report")
