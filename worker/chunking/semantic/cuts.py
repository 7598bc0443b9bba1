"""Where chunks start: the best gaps first, within a hard minimum and maximum size.

Pure and model-free: grains in document order (:mod:`.layout`), a *key* per gap that orders the
places to cut (the higher the better), and a *benefit* that says whether a gap is worth a cut on
its own (> 0). The document is split recursively:

1. a segment takes its best *eligible* gap: one that leaves at least ``minimum`` on both sides,
   no side made only of headings, and does not follow a heading (a heading opens what comes after
   it, never ends a chunk);
2. a segment within ``cap`` is split there only when that gap's benefit is positive, else it is a
   chunk; a segment over ``cap`` is split at its best eligible gap whatever its benefit;
3. both halves go through 1–2 again.

So positive-benefit gaps are placed strongest first, each kept unless it would leave a piece under
the minimum next to a stronger one; a segment over the cap is cut at the best place it has, and
the halves are then finished on their own content. Every decision reads only the segment's own
gaps: an edit changes the segments that contain it, and boundaries elsewhere stay where they were
(no greedy packing from the document's start that would carry a shift to its end).

When no eligible gap exists in a segment over the cap (the layout's grain limit makes that
impossible for sizes that add up, as tokens of BERT-style tokenizers do), a segment within the
``atom_cap`` stays whole; else the heading rules are dropped first, then the minimum: the hard
cap always holds.

A split chosen for its own segment can leave a half that cannot keep an atom whole: a small
section before a code block that almost fills the cap, say, where the section should have gone to
the chunk before. Such a cut is *repaired*: the few chunks around it are cut again, all
combinations at once (:func:`_best_window`), and the result is kept when it cuts no atom that fits
the cap. The repair reads only those chunks, so it stays local too.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

# Below every finite key (keys are tiers × 1e3 plus a bounded benefit).
_LAST_RESORT = -1e18


class RangeArgmax:
    """The leftmost position of the largest key in any range, in constant time (sparse table)."""

    def __init__(self, keys: NDArray[np.float64]) -> None:
        self.keys = keys
        count = len(keys)
        positions = np.arange(count, dtype=np.int32)
        self.table = [positions]
        width = 1
        while 2 * width <= count:
            previous = self.table[-1]
            left = previous[: count - 2 * width + 1]
            right = previous[width : width + count - 2 * width + 1]
            self.table.append(np.where(keys[right] > keys[left], right, left))
            width *= 2

    def argmax(self, low: int, high: int) -> int:
        """Position of the largest key in ``[low, high]`` (inclusive, ``low <= high``)."""
        level = (high - low + 1).bit_length() - 1
        row = self.table[level]
        left = int(row[low])
        right = int(row[high - (1 << level) + 1])
        return right if self.keys[right] > self.keys[left] else left


@dataclass(frozen=True)
class Grains:
    """What :func:`segment` reads about the grains of one document.

    The size of grains ``i..j`` (inclusive) is ``right_at[j] - left_at[i]``: for tokens the
    prefix sums of the grain sizes, for characters the grains' own offsets (so the whitespace
    between them counts)."""

    left_at: NDArray[np.int64]
    right_at: NDArray[np.int64]
    keys: NDArray[np.float64]
    """Per gap, indexed by the grain after it (``keys[0]`` unused); ``-inf``: never eligible."""
    benefits: NDArray[np.float64]
    heading: NDArray[np.bool_]
    """Grains of headings: no chunk may be made of them alone."""
    whole: NDArray[np.bool_]
    """Per gap: inside an atom that fits the cap (a code block, a table, a list item…), which a
    cut there would break although it could stay whole."""
    glued: NDArray[np.bool_]
    """Per gap: inside an atom, or after what opens the next atom (a heading, a line ending in
    ``:``): the grains on both sides belong together."""

    @property
    def count(self) -> int:
        return len(self.left_at)

    def size(self, first: int, stop: int) -> int:
        return int(self.right_at[stop - 1] - self.left_at[first])

    def one_atom(self, first: int, stop: int) -> bool:
        """Whether grains ``[first, stop)`` are one atom with what opens it (headings, a line
        ending in ``:``)."""
        return bool(self.glued[first + 1 : stop].all())


@dataclass(frozen=True)
class Caps:
    """``cap``: the most a chunk may hold; ``atom_cap`` (≥ ``cap``): the most a chunk made of one
    atom (and the headings opening it) may hold, so that an atom between the two stays whole
    (``context`` cuts its cores to leave room for context, but not through a code block that
    fits the whole chunk); ``minimum``: the least any chunk holds."""

    cap: int
    minimum: int
    atom_cap: int

    def fits(self, grains: Grains, first: int, stop: int) -> bool:
        size = grains.size(first, stop)
        if size <= self.cap:
            return True
        return size <= self.atom_cap and grains.one_atom(first, stop)


@dataclass(frozen=True)
class Cut:
    """A chunk ``[first, stop)`` of grains and why it starts where it does."""

    first: int
    stop: int
    start: str  # "document" | "boundary" | "cap"


class _Segmenter:
    def __init__(self, grains: Grains, caps: Caps, min_grains: int) -> None:
        self.g = grains
        self.caps = caps
        self.minimum = caps.minimum
        self.min_grains = min_grains
        self.best = RangeArgmax(grains.keys)
        content = np.flatnonzero(~grains.heading)
        self.content = content  # grains that are not headings, for the heading-only rule
        # The same, as lists for `bisect`: eligible() runs for every split tried, and numpy's
        # searchsorted costs a microsecond or more a call on a scalar (docs/benchmarks.md).
        self._left_at: list[int] = grains.left_at.tolist()
        self._right_at: list[int] = grains.right_at.tolist()
        self._content: list[int] = content.tolist()

    def eligible(
        self, first: int, stop: int, headings: bool, grains: int, floor: int | None = None
    ) -> tuple[int, int]:
        """Gaps ``g`` (the new chunk starts with grain ``g``) allowed in ``[first, stop)``,
        each side at least ``floor`` (default: the minimum): ``[low, high]``, empty when
        ``low > high``."""
        least = self.minimum if floor is None else floor
        left_at, right_at, content = self._left_at, self._right_at, self._content
        # left = right_at[g-1] - left_at[first] >= least
        low = bisect_left(right_at, left_at[first] + least) + 1
        # right = right_at[stop-1] - left_at[g] >= least
        high = bisect_right(left_at, right_at[stop - 1] - least) - 1
        low = max(low, first + grains)
        high = min(high, stop - grains)
        if headings:
            at = bisect_left(content, first)
            if at < len(content) and content[at] < stop:
                last = content[bisect_left(content, stop) - 1]
                low = max(low, content[at] + 1)
                high = min(high, last)
        return low, high

    def split_at(self, first: int, stop: int) -> int | None:
        """Where to split ``[first, stop)``, or ``None`` to keep it as one chunk."""
        g = self.g
        within = self.caps.fits(g, first, stop)
        low, high = self.eligible(first, stop, True, self.min_grains if within else 1)
        if low <= high:
            best = self.best.argmax(low, high)
            if g.keys[best] > -np.inf:
                if g.benefits[best] > 0:
                    return best
                if within:
                    return None
                # A cut only the cap asks for: both halves at least a quarter of the cap, so
                # the pieces of a long run are chunks, not crumbs at the minimum.
                low, high = self.eligible(
                    first, stop, True, 1, max(self.minimum, self.caps.cap // 4)
                )
                if low <= high and g.keys[wide := self.best.argmax(low, high)] > -np.inf:
                    return wide
                return best
        if within or g.size(first, stop) <= self.caps.atom_cap:
            return None  # context's soft core cap gives way before any rule does
        return self._fallback(first, stop)

    def _fallback(self, first: int, stop: int) -> int:
        """A segment over the cap with no eligible gap: the heading rules go first, then the
        minimum (the most balanced gap of the best kind)."""
        g = self.g
        low, high = self.eligible(first, stop, False, 1)
        if low <= high:
            keys = g.keys[low : high + 1]
            # A gap after a heading is the last resort before a piece under the minimum.
            return low + int(np.argmax(np.where(np.isfinite(keys), keys, _LAST_RESORT)))
        gaps = np.arange(first + 1, stop)
        smaller = np.minimum(
            g.right_at[gaps - 1] - g.left_at[first], g.right_at[stop - 1] - g.left_at[gaps]
        )
        return int(gaps[int(np.argmax(smaller))])


# Chunks on each side of a cut that breaks an atom, cut again together by the repair.
REPAIR_REACH = 2
# Values of a cut in the repair's search: it maximises their sum (benefits are clipped to ±50).
_GLUE_COST = -1e3
_INSIDE_COST = -1e4
_SOFT_CAP_COST = -1e5  # a piece over ``cap`` but within ``atom_cap`` (context's core cap)
_WHOLE_COST = -1e7


def _cut_value(grains: Grains, gap: int) -> float:
    key = float(grains.keys[gap])
    if key == -np.inf:
        return -np.inf
    if grains.whole[gap]:
        return _WHOLE_COST
    benefit = float(grains.benefits[gap])
    if benefit > -np.inf:
        return max(-50.0, min(50.0, benefit))
    return _GLUE_COST if key >= 3 * 1e3 else _INSIDE_COST


def _best_window(grains: Grains, first: int, stop: int, caps: Caps) -> list[int] | None:
    """The cuts inside ``[first, stop)`` (both ends are kept cuts) of highest total value whose
    pieces all keep the size rules; ``None`` when no such cutting exists."""
    size = grains.size
    best: dict[int, tuple[float, int]] = {first: (0.0, -1)}
    for end in range(first + 1, stop + 1):
        value_here = 0.0 if end == stop else _cut_value(grains, end)
        if value_here == -np.inf:
            continue
        top: tuple[float, int] | None = None
        for begin, (total, _) in best.items():
            piece = size(begin, end)
            if piece < caps.minimum or piece > caps.atom_cap or grains.heading[begin:end].all():
                continue
            if not caps.fits(grains, begin, end):
                total += _SOFT_CAP_COST
            if top is None or total > top[0]:
                top = (total, begin)
        if top is not None:
            best[end] = (top[0] + value_here, top[1])
    if stop not in best:
        return None
    cuts: list[int] = []
    at = best[stop][1]
    while at > first:
        cuts.append(at)
        at = best[at][1]
    return cuts[::-1]


def _needs_repair(grains: Grains, starts: list[int], at: int, caps: Caps) -> bool:
    """Whether the cut ``starts[at]`` breaks an atom fitting the cap, follows a heading, or
    leaves a chunk beside it under the minimum or of headings alone: the fallback's last
    resorts, which a cutting of the chunks around it may avoid."""
    cut = starts[at]
    if grains.whole[cut] or grains.heading[cut - 1]:
        return True
    stop = starts[at + 1] if at + 1 < len(starts) else grains.count
    return any(
        grains.size(begin, end) < caps.minimum or bool(grains.heading[begin:end].all())
        for begin, end in ((starts[at - 1], cut), (cut, stop))
    )


def _repair(grains: Grains, starts: list[int], caps: Caps) -> list[int]:
    """Chunk starts with every cut that :func:`_needs_repair` cut again around it, when another
    cutting of the chunks near it keeps every atom whole and every chunk within the size
    rules (its cuts never follow a heading: such gaps have no value).

    Found by hypothesis: a split chosen for its segment alone can leave a half whose only
    cuts break the minimum (a trailing heading after a code block that nearly fills the
    cap), where cutting one gap earlier (after a line ending in ':') keeps every rule."""
    at = 1
    while at < len(starts):
        if not _needs_repair(grains, starts, at, caps):
            at += 1
            continue
        low = max(0, at - REPAIR_REACH)
        high = min(len(starts), at + REPAIR_REACH)
        first = starts[low]
        stop = starts[high] if high < len(starts) else grains.count
        found = _best_window(grains, first, stop, caps)
        if found is not None and not any(grains.whole[g] for g in found):
            starts[low + 1 : high] = found
            at = low + 1 + len(found)
        else:
            at += 1
    return starts


def segment(grains: Grains, caps: Caps, min_grains: int = 1) -> list[Cut]:
    """The chunks of a document (module docstring), in document order."""
    count = grains.count
    if count == 0:
        return []
    segmenter = _Segmenter(grains, caps, max(1, min_grains))
    found: list[int] = []
    stack = [(0, count)]
    while stack:
        first, stop = stack.pop()
        at = segmenter.split_at(first, stop) if stop - first > 1 else None
        if at is None:
            found.append(first)
        else:
            stack.append((at, stop))
            stack.append((first, at))
    starts = _repair(grains, sorted(found), caps)
    cuts: list[Cut] = []
    for first, stop in zip(starts, [*starts[1:], count], strict=True):
        if first == 0:
            reason = "document"
        elif grains.benefits[first] > 0:
            reason = "boundary"
        else:
            reason = "cap"
        cuts.append(Cut(first, stop, reason))
    return cuts
