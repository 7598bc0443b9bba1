"""Content-defined packing: which gaps between units become chunk boundaries.

Greedy packing (fill each chunk to the cap) makes every boundary depend on where the chunk
started, so an edit near the start of a document moves every boundary after it. Here a gap
becomes a boundary when the chunk reaching it is at least as large as the gap's own
*threshold*, a number fixed by the gap alone (its level and the hash of the text around it,
:mod:`.units`), in the manner of content-defined chunking (rsync, FastCDC's normalised
chunking): a section break takes any chunk of at least the minimum; a paragraph break a chunk
between the minimum and the target, by its hash; a break between list items one between the
minimum and the cap; a sentence break one between the target and the cap. The first gap whose
threshold the chunk reaches ends it; two versions of a document that differ by an edit reach
the same gaps with different sizes only until one gap ends a chunk in both, which happens soon
after the edit (bench/edit_stability.py measures it).

Hard rules around that:

* no chunk over the cap: when no threshold was reached before the next unit would pass the
  cap, the chunk ends at its strongest gap (level first, then hash, the later on a tie);
* no chunk under the minimum unless the document is: a cut must leave at least the minimum on
  both sides; text units are at most the limit, so such a cut nearly always exists; where a
  whole block (up to the cap) follows a short start it may not, and :func:`settle` joins the
  short chunk with a neighbour or takes units from one;
* no chunk of heading and rule lines alone: a cut needs some other unit before it, and
  :func:`settle` treats a heading-only chunk like a short one, looking right first;
* the pieces of a word cut at characters in tokens are always cut apart (:data:`.units.FORCED`).

The compiled core states this module again in C (``_native/_packing.h``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import pairwise

from worker.chunking.text.structure import BLOCK, GLUE, ITEM, LINE, SECTION, SENTENCE
from worker.chunking.text.units import FORCED, Units

HASH_RANGE = 1 << 16


class Sizes:
    """The three sizes packing works with, in the unit of the measure."""

    def __init__(self, cap: int, minimum: int | None = None) -> None:
        self.cap = cap
        self.minimum = max(1, cap // 8) if minimum is None else minimum
        """No chunk is smaller, but a document that is (or a remainder no cut can avoid)."""
        self.target = max(self.minimum, cap * 3 // 4)
        """Where paragraph breaks stop being optional and sentence breaks start to be."""
        self.limit = max(1, cap - 2 * self.minimum)
        """Units are at most this large (words up to the cap), so a chunk that must end
        before the cap can always end at a size from the minimum to the cap while leaving the
        minimum after it."""


ChunkSizes = Callable[[int], Sizes]
"""The sizes of the chunk that starts at a unit, for a strategy whose chunks differ in size
(``adaptive``: the density of the text there). Its cap is a soft one, at most the hard cap
of the document's :class:`Sizes`; the thresholds of the chunk's gaps follow it."""


ANCHOR_SHARE = HASH_RANGE // 4
"""Paragraph breaks whose hash is below this (a quarter of them) are anchors, as every
section break is; so are line breaks inside a block too large for one chunk (a long table,
code block or list item), by the same share."""


def is_anchor(level: int, hash16: int) -> bool:
    """Whether the gap is an anchor: a boundary decided by the gap alone, where the document
    is cut into segments that are packed each on its own (see :func:`pack`)."""
    return level == SECTION or (level in (BLOCK, LINE) and hash16 < ANCHOR_SHARE)


def threshold(level: int, hash16: int, sizes: Sizes) -> int:
    """The size from which a chunk ends at a gap of this level and hash inside a segment."""
    minimum, target, cap = sizes.minimum, sizes.target, sizes.cap
    if level == SECTION:
        return minimum + ((hash16 * (target - minimum)) >> 17)
    if level == BLOCK:
        return minimum + ((hash16 * (target - minimum)) >> 16)
    if level == ITEM:
        return minimum + ((hash16 * (cap - minimum)) >> 16)
    if level == SENTENCE:
        return target + ((hash16 * (cap - target)) >> 16)
    return cap + 1


def pack(
    units: Units,
    sizes: Sizes,
    *,
    anchors: Sequence[bool] | None = None,
    whole: bool = True,
    chunk_sizes: ChunkSizes | None = None,
) -> list[tuple[int, int]]:
    """Chunks as ``(first unit, last unit)``, in order, covering every unit.

    The anchors cut the document into segments, but an anchor less than the minimum (or only
    headings) after the anchor before it, and the last one when less than the minimum is
    left after it; each segment is packed on its own (:func:`pack_segment`), so an edit moves
    boundaries only in its own segment and, where it changes the stretch between two anchors,
    in the one next to it.

    ``anchors[k]``: whether the gap before unit ``k`` is an anchor (default:
    :func:`is_anchor`); ``whole``: a document within the cap is one chunk; ``chunk_sizes``:
    see :data:`ChunkSizes`."""
    count = len(units.starts)
    if count == 0:
        return []
    first_sizes = sizes if chunk_sizes is None else chunk_sizes(0)
    if whole and units.before_end[-1] - units.before_start[0] <= first_sizes.cap:
        return [(0, count - 1)]  # a document within the cap is one chunk
    # An anchor is kept when the stretch since the anchor before it (kept or not) makes a
    # chunk of its own: a rule of the two anchors alone, so that dropping one never decides
    # about the next (a run of small sections is one segment, packed below).
    bounds = [0]
    candidate = 0
    for k in range(1, count):
        anchor = is_anchor(units.levels[k], units.hashes[k]) if anchors is None else anchors[k]
        if anchor:
            if _fills(units, candidate, k - 1, sizes):
                bounds.append(k)
            candidate = k
    if len(bounds) > 1 and not _fills(units, bounds[-1], count - 1, sizes):
        bounds.pop()
    bounds.append(count)
    chunks: list[tuple[int, int]] = []
    for first, after in pairwise(bounds):
        chunks.extend(pack_segment(units, sizes, first, after - 1, chunk_sizes))
    return settle(chunks, units, sizes)


def _fills(units: Units, first: int, last: int, sizes: Sizes) -> bool:
    """Whether units ``first..last`` make a chunk of their own: the minimum, not only headings."""
    return units.before_end[last] - units.before_start[first] >= sizes.minimum and not all(
        units.headings[first : last + 1]
    )


def pack_segment(
    units: Units, sizes: Sizes, first: int, end: int, chunk_sizes: ChunkSizes | None = None
) -> list[tuple[int, int]]:
    """The chunks of the segment of units ``first..end``: the rest of the segment once it fits
    the cap, else from the chunk's start the first gap whose threshold the chunk reaches
    (leaving the minimum to the segment's end), else the strongest gap before the cap. With
    ``chunk_sizes``, the fit and the thresholds read the sizes of the chunk's first unit; the
    hard cap and the minimum stay ``sizes``'."""
    before_start, before_end = units.before_start, units.before_end
    levels, hashes, headings = units.levels, units.hashes, units.headings
    cap, minimum = sizes.cap, sizes.minimum
    total = before_end[end]
    chunks: list[tuple[int, int]] = []
    while first <= end:
        own = sizes if chunk_sizes is None else chunk_sizes(first)
        base = before_start[first]
        if total - base <= own.cap:
            chunks.append((first, end))
            break
        cut = best = soft = -1
        best_key = soft_key = -1
        last = first
        content = False  # the chunk holds more than heading and rule lines
        while last < end:
            size = before_end[last] - base
            if size > cap:
                break
            content = content or not headings[last]
            level = levels[last + 1]
            if level == FORCED:
                cut = last
                break
            if content and size >= minimum and total - before_start[last + 1] >= minimum:
                # A glue gap (what a heading or a ':' line opens) has no threshold of its own:
                # the chunk's soft cap (adaptive's) must not end a chunk there, only the hard
                # cap may (found by hypothesis: an intro cut from what it introduced).
                if size >= threshold(level, hashes[last + 1], sizes if level == GLUE else own):
                    cut = last
                    break
                key = level * HASH_RANGE + hashes[last + 1]
                if key >= best_key:
                    best, best_key = last, key
                if level >= SENTENCE and key >= soft_key:
                    soft, soft_key = last, key
            last += 1
        if cut < 0 and total - base <= cap:
            # The rest fits the hard cap but not the chunk's soft cap, and no threshold was
            # reached: the strongest gap that has a threshold, else the rest whole (never a
            # glue, line or word gap the hard cap does not force).
            if soft < 0:
                chunks.append((first, end))
                break
            cut = soft
        if cut < 0:
            cut = best if best >= 0 else max(last - 1, first)
        chunks.append((first, cut))
        first = cut + 1
    return chunks


def settle(chunks: list[tuple[int, int]], units: Units, sizes: Sizes) -> list[tuple[int, int]]:
    """The few chunks packing could not keep from being under the minimum or heading-only
    (a whole block up to the cap may follow a short start) joined with a neighbour, or, where
    the two would pass the cap, given units from it: a heading-only chunk looks right first
    (a heading joins what it opens), a small one left first. Only neighbours move, so edits
    stay local."""
    settled = [list(c) for c in chunks]
    k = 0
    while k < len(settled) and len(settled) > 1:
        first, last = settled[k]
        bare = not any(not units.headings[u] for u in range(first, last + 1))
        if not bare and _size(units, first, last) >= sizes.minimum:
            k += 1
            continue
        sides = (1, -1) if bare else (-1, 1)
        joined = next((side for side in sides if _join(settled, k, side, units, sizes)), 0)
        if joined < 0:
            k -= 1  # the joined chunk is the one before: looked at again, then what follows
        elif joined == 0:
            any(_lend(settled, k, side, units, sizes) for side in sides)
            k += 1
    for k in range(len(settled) - 1):
        _unglue(settled[k], settled[k + 1], units, sizes)
    return [(first, last) for first, last in settled]


def _unglue(left: list[int], right: list[int], units: Units, sizes: Sizes) -> None:
    """A chunk that ends at a glue gap (a ``:`` line before what it introduces) gives that
    last unit to the chunk after it, where both stay within the rules: a short chunk joined
    to the one before can leave it there (found by hypothesis, with adaptive's overlap)."""
    last = left[1]
    if (
        units.levels[right[0]] == GLUE
        and last > left[0]
        and units.levels[last] not in (GLUE, FORCED)
        and _size(units, left[0], last - 1) >= sizes.minimum
        and any(not units.headings[u] for u in range(left[0], last))
        and _size(units, last, right[1]) <= sizes.cap
    ):
        left[1], right[0] = last - 1, last


def _size(units: Units, first: int, last: int) -> int:
    return units.before_end[last] - units.before_start[first]


def _join(settled: list[list[int]], k: int, side: int, units: Units, sizes: Sizes) -> bool:
    """Chunk ``k`` joined with its neighbour on ``side`` when the two fit the cap."""
    other = k + side
    if not 0 <= other < len(settled):
        return False
    left, right = (settled[other], settled[k]) if side < 0 else (settled[k], settled[other])
    if units.levels[right[0]] == FORCED or _size(units, left[0], right[1]) > sizes.cap:
        return False
    left[1] = right[1]
    settled.remove(right)
    return True


def _lend(settled: list[list[int]], k: int, side: int, units: Units, sizes: Sizes) -> bool:
    """Chunk ``k`` given the units of its neighbour on ``side`` nearest to it, up to the
    neighbour's strongest gap that leaves both at least the minimum, within the cap, and
    both holding more than headings."""
    other = k + side
    if not 0 <= other < len(settled):
        return False
    mine, theirs = settled[k], settled[other]
    boundary = mine[0] if side < 0 else theirs[0]
    if units.levels[boundary] == FORCED:
        return False
    best, best_key = -1, -1
    for gap in range(theirs[0] + 1, theirs[1] + 1):  # the gap before unit `gap`
        if side < 0:
            kept, given = (theirs[0], gap - 1), (gap, mine[1])
        else:
            given, kept = (mine[0], gap - 1), (gap, theirs[1])
        if (
            _size(units, *kept) >= sizes.minimum
            and sizes.minimum <= _size(units, *given) <= sizes.cap
            and any(not units.headings[u] for u in range(given[0], given[1] + 1))
            and any(not units.headings[u] for u in range(kept[0], kept[1] + 1))
        ):
            key = units.levels[gap] * HASH_RANGE + units.hashes[gap]
            if key > best_key:
                best, best_key = gap, key
    if best < 0:
        return False
    if side < 0:
        theirs[1], mine[0] = best - 1, best
    else:
        mine[1], theirs[0] = best - 1, best
    return True
