"""Seam scores with their noise: micro precision/recall/F1 over a seam set, a bootstrap interval
over its documents, and paired differences between two chunkers on the same documents.

Scoring per document is :func:`tests.support.seams.score` (±1 sentence, each seam matched
once); the set's figures add up the documents' counts (micro average). The bootstrap resamples
*documents* (a document's boundaries are not independent of each other), with a fixed seed, so
the same scores give the same interval.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
import numpy as np
from numpy.typing import NDArray

from tests.support.seams import Scores

RESAMPLES = 2000
SEED = 21


class Summary(msgspec.Struct, frozen=True):
    precision: float
    recall: float
    f1: float
    f1_low: float  # 95 % bootstrap interval over documents
    f1_high: float
    doc_f1_sd: float  # spread of the per-document F1
    predicted: int
    true: int

    def row(self) -> str:
        return (
            f"{self.precision:.3f} | {self.recall:.3f} | **{self.f1:.3f}** "
            f"({self.f1_low:.3f}–{self.f1_high:.3f}) | {self.doc_f1_sd:.2f}"
        )


def _counts(per_doc: Sequence[Scores]) -> NDArray[np.float64]:
    return np.array([[s.predicted, s.true, s.matched] for s in per_doc], dtype=np.float64)


def _f1(totals: NDArray[np.float64]) -> NDArray[np.float64]:
    """F1 of rows of (predicted, true, matched) totals: 2·matched / (predicted + true)."""
    denominator = totals[..., 0] + totals[..., 1]
    out: NDArray[np.float64] = np.divide(
        2 * totals[..., 2], denominator, out=np.zeros_like(denominator), where=denominator > 0
    )
    return out


def resample_indices(documents: int, resamples: int = RESAMPLES) -> NDArray[np.int64]:
    rng = np.random.default_rng(SEED)
    return rng.integers(0, documents, size=(resamples, documents))


def summarise(per_doc: Sequence[Scores]) -> Summary:
    counts = _counts(per_doc)
    total = Scores(*(int(v) for v in counts.sum(axis=0)))
    boot = _f1(counts[resample_indices(len(per_doc))].sum(axis=1))
    low, high = np.percentile(boot, [2.5, 97.5])
    return Summary(
        total.precision,
        total.recall,
        total.f1,
        float(low),
        float(high),
        float(np.std(_f1(counts))),
        total.predicted,
        total.true,
    )


def paired_difference(a: Sequence[Scores], b: Sequence[Scores]) -> tuple[float, float, float]:
    """F1(a) − F1(b) on the same documents, with its 95 % bootstrap interval (documents
    resampled together for both)."""
    ca, cb = _counts(a), _counts(b)
    indices = resample_indices(len(a))
    diff = _f1(ca[indices].sum(axis=1)) - _f1(cb[indices].sum(axis=1))
    low, high = np.percentile(diff, [2.5, 97.5])
    return float(_f1(ca.sum(axis=0)) - _f1(cb.sum(axis=0))), float(low), float(high)
