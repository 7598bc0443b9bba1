"""Scores of retrieved chunks against a highlighted answer, on sets of document characters.

A chunk is a tuple of half-open character ranges of its document (one range for a contiguous
chunk). For one question, with R the characters of the reference answer and T the characters
of the retrieved chunks (the union of their ranges, so overlapping chunks count a character
once):

* recall = |T ∩ R| / |R|
* precision = |T ∩ R| / |T|
* IoU = |T ∩ R| / |T ∪ R|

Characters of other documents than the reference's never intersect R, but they do count in T:
a chunk retrieved from the wrong document is pure noise.

Recall at a budget: the retrieved chunks are read in rank order, each adding its length (the
characters of its ranges, overlapping chunks counted again: that is what a reader is handed)
until ``budget`` characters are spent; the chunk that does not fit whole is cut to the
characters that still fit (its first ones, in document order), and reading stops. The score is
|T_budget ∩ R| / |R|.

With several references a question's score is the one of the reference the rule picks
(bench/retrieval_bench.py states which).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import msgspec
import numpy as np
from numpy.typing import NDArray

Range = tuple[int, int]  # half-open [start, end)


class Located(msgspec.Struct, frozen=True):
    """A retrieved chunk: which document, and which of its characters."""

    doc_id: str
    ranges: tuple[Range, ...]

    @property
    def length(self) -> int:
        return sum(end - start for start, end in self.ranges)


class Scores(msgspec.Struct, frozen=True):
    recall: float
    precision: float
    iou: float


def merge(ranges: Iterable[Range]) -> list[Range]:
    """The union of ``ranges`` as sorted, disjoint, non-touching ranges (empty ones dropped)."""
    merged: list[Range] = []
    for start, end in sorted(r for r in ranges if r[1] > r[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def size(ranges: Iterable[Range]) -> int:
    return sum(end - start for start, end in merge(ranges))


def overlap(ranges: Iterable[Range], reference: Range) -> int:
    """How many characters of ``reference`` the union of ``ranges`` covers."""
    ref_start, ref_end = reference
    return sum(max(0, min(end, ref_end) - max(start, ref_start)) for start, end in merge(ranges))


def score(retrieved: Sequence[Located], doc_id: str, reference: Range) -> Scores:
    """Recall, precision and IoU of the characters of ``retrieved`` against ``reference``
    (a range of document ``doc_id``)."""
    ref_len = reference[1] - reference[0]
    if ref_len <= 0:
        raise ValueError(f"empty reference {reference}")
    own = [r for chunk in retrieved if chunk.doc_id == doc_id for r in chunk.ranges]
    elsewhere = sum(size(c.ranges) for c in _other_docs(retrieved, doc_id))
    hit = overlap(own, reference)
    retrieved_chars = size(own) + elsewhere
    union = retrieved_chars + ref_len - hit
    return Scores(
        recall=hit / ref_len,
        precision=hit / retrieved_chars if retrieved_chars else 0.0,
        iou=hit / union,
    )


def _other_docs(retrieved: Sequence[Located], doc_id: str) -> list[Located]:
    """Chunks of other documents, merged per document (overlap counts once there too)."""
    by_doc: dict[str, list[Range]] = {}
    for chunk in retrieved:
        if chunk.doc_id != doc_id:
            by_doc.setdefault(chunk.doc_id, []).extend(chunk.ranges)
    return [Located(doc, tuple(merge(ranges))) for doc, ranges in by_doc.items()]


def within_budget(ranked: Sequence[Located], budget: int) -> list[Located]:
    """The characters a reader gets from ``ranked`` for ``budget`` characters: whole chunks
    in order, then the first characters of the one that does not fit."""
    kept: list[Located] = []
    left = budget
    for chunk in ranked:
        if left <= 0:
            break
        if chunk.length <= left:
            kept.append(chunk)
            left -= chunk.length
            continue
        cut: list[Range] = []
        for start, end in chunk.ranges:
            take = min(end - start, left)
            if take > 0:
                cut.append((start, start + take))
                left -= take
        kept.append(Located(chunk.doc_id, tuple(cut)))
        break
    return kept


def budget_recall(ranked: Sequence[Located], doc_id: str, reference: Range, budget: int) -> float:
    return score(within_budget(ranked, budget), doc_id, reference).recall


def top_k(questions: NDArray[np.float32], chunks: NDArray[np.float32], k: int) -> NDArray[np.int64]:
    """Indices of the ``k`` most similar chunks per question, best first (vectors are unit)."""
    similarity = questions @ chunks.T
    k = min(k, chunks.shape[0])
    best = np.argpartition(-similarity, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(similarity, best, axis=1), axis=1, kind="stable")
    return np.take_along_axis(best, order, axis=1)
