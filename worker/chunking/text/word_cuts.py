"""Cutting one word at characters: the last resort of every strategy for a whitespace-free run
over its cap (a base64 blob, a long URL, a hash, CJK or Thai without spaces).

A piece is the longest prefix within the cap, in characters or in exact token counts, moved
back to the last place between two grapheme clusters (:mod:`.graphemes`), so no cut splits what
a reader sees as one character. Two exceptions, where nothing smaller exists: a cluster whose
own count passes a token cap is a piece of its own (as a single character is), and a cluster
longer than a cap in characters (a letter under thousands of combining marks) is cut at the
cap, which comes first.

The rule strategies' units (:func:`.units.read_units`, and their compiled cores, which call
:func:`cut_word` for such a word), the embedding strategies' layout and windows
(:func:`.segment.split_to_cap`) and the character cap (:mod:`.character_cap`) all cut here.
"""

from __future__ import annotations

from collections.abc import Callable

from worker.chunking.text.graphemes import ceil_boundary, floor_boundary

Size = Callable[[int, int], int]
"""The size of ``text[a:b]`` for a piece ``(a, b)`` of the text being cut."""


def longest_prefix_within(count: Size, start: int, end: int, cap: int) -> int:
    """The length of the piece of ``[start, end)`` that starts it, for a word over ``cap``:
    the longest prefix whose ``count(start, start + length)`` is within ``cap`` that the
    search below finds; 1 when none is (a single character over the cap is a piece of its
    own).

    The search first doubles a length from ``cap`` characters until a prefix is over the cap
    (or the word ends), then bisects between the last length within it and that one. Bisecting
    over the whole rest of the word tokenized prefixes up to the word's end for every piece:
    quadratic in the length of a whitespace-free run, so an inline base64 image held its
    partition for as long as that took. Here every count is of at most twice the piece it
    finds.

    Token counts are not monotonic in the prefix length (a long word can collapse into one
    unknown token), so the search only ever keeps lengths it has counted."""
    available = end - start
    good, high = 0, min(available, cap)
    while count(start, start + high) <= cap:
        good = high
        if high == available:
            return high
        high = min(available, high * 2)
    low, high = good + 1, high - 1
    good = max(good, 1)
    while low <= high:
        middle = (low + high) // 2
        if count(start, start + middle) <= cap:
            good, low = middle, middle + 1
        else:
            high = middle - 1
    return good


def piece_end(size: Size | None, text: str, start: int, end: int, cap: int) -> int:
    """Where the first piece of the word ``text[start:end]`` ends: within ``cap`` characters
    (``size`` None) or ``cap`` of ``size``, at a cluster boundary (module docstring)."""
    if size is None:
        stop = min(end, start + cap)
        if stop == end:
            return end
        snapped = floor_boundary(text, stop, start)
        return stop if snapped is None else snapped
    limit = end
    while True:
        stop = start + longest_prefix_within(size, start, limit, cap)
        if stop == end:
            return end
        snapped = floor_boundary(text, stop, start)
        if snapped is None:  # the first cluster alone is over the cap: a piece of its own
            return ceil_boundary(text, start + 1, end)
        if snapped == stop or size(start, snapped) <= cap:
            return snapped
        limit = snapped  # the shorter prefix counts more (counts are not monotonic): again


def cut_word(
    count_exact: Callable[[str], int] | None, text: str, start: int, end: int, cap: int
) -> list[tuple[int, int, int]]:
    """The word ``text[start:end]``, over ``cap``, cut at characters: each piece's start, end
    and size, in order. The size is in characters when ``count_exact`` is None, else
    ``count_exact`` of the piece's text (its tokens counted whole: two pieces of one word do
    not add up to the word).

    The compiled cores call this for such a word (with a counter's ``count_exact`` bound,
    or None in characters): the cluster rules and exact counts are Python's, and a whole
    document used to go to the Python twin for one word of a base64 blob or a long URL."""
    size: Size | None = None
    if count_exact is not None:
        exact = count_exact

        def size(a: int, b: int) -> int:
            return exact(text[a:b])

    cuts: list[tuple[int, int, int]] = []
    while start < end:
        stop = piece_end(size, text, start, end, cap)
        cuts.append((start, stop, stop - start if size is None else size(start, stop)))
        start = stop
    return cuts
