"""Finding one cut point near a size limit, without segmenting the whole document.

A size-driven strategy only needs to know, for each chunk, the last sentence end before its
limit and where the trailing sentences it carries over begin. Both are found by scanning a
small window just behind the limit with the same candidate rules as
:func:`~worker.chunking.segment.split_sentences`, so the cost is per chunk, not per sentence.
"""

from __future__ import annotations

import re

from worker.chunking.segment import CANDIDATE, is_false_stop

_WINDOW = 128
_SPACES = (" ", "\t", "\u3000", "\xa0")


def _rstrip_to(text: str, end: int, floor: int) -> int:
    """``end`` moved left past whitespace, not below ``floor``."""
    while end > floor and text[end - 1].isspace():
        end -= 1
    return end


def _lstrip_from(text: str, start: int) -> int:
    """``start`` moved right past whitespace."""
    size = len(text)
    while start < size and text[start].isspace():
        start += 1
    return start


def _candidates(text: str, window_start: int, window_end: int) -> list[re.Match[str]]:
    """Every place a sentence may end in the window, before the exceptions are checked.

    The window is read one character past its end so that the look-ahead of a terminator
    sees the real next character rather than an artificial end of text.
    """
    return list(CANDIDATE.finditer(text, window_start, min(len(text), window_end + 1)))


def _boundary(text: str, match: re.Match[str], window_start: int) -> int:
    """Where the sentence ends at a candidate ``match``, or -1 when it is a false stop.

    Only Latin terminators have exceptions, and those are checked only for the candidates a
    search actually reaches (usually the last or first one of its window).
    """
    if match.group("line") is not None:
        return match.start()
    if match.group("latin") is not None and is_false_stop(text, match, window_start):
        return -1
    return match.end()


def _ends_in(text: str, window_start: int, window_end: int) -> list[tuple[int, int]]:
    """(sentence end, next sentence search position) for every boundary in the window."""
    found: list[tuple[int, int]] = []
    for match in _candidates(text, window_start, window_end):
        end = _boundary(text, match, window_start)
        if 0 <= end <= window_end:
            found.append((end, match.end()))
    return found


def last_sentence_end(text: str, start: int, floor: int, limit: int) -> int | None:
    """The largest sentence end ``e`` with ``floor < e <= limit`` (whitespace trimmed).

    ``start`` is where the chunk begins; it bounds the backwards search.
    """
    high = limit
    while high > floor:
        low = max(start, high - _WINDOW)
        for match in reversed(_candidates(text, low, high)):
            end = _boundary(text, match, low)
            if end < 0 or end > high:
                continue
            end = _rstrip_to(text, end, start)
            if floor < end <= limit:
                return end
        if low <= start:
            return None
        high = low + 8  # a terminator cut by the window edge is read again
    return None


def first_sentence_end(text: str, floor: int, limit: int) -> int | None:
    """The smallest sentence end ``e`` with ``floor < e <= limit`` (whitespace trimmed)."""
    low = floor
    while low < limit:
        high = min(limit, low + 4 * _WINDOW)
        for match in CANDIDATE.finditer(text, low, min(len(text), high + 1)):
            end = _boundary(text, match, low)
            if end < 0 or end > high:
                continue
            end = _rstrip_to(text, end, floor)
            if end > floor:
                return end
        if high >= limit:
            return None
        low = high - 8
    return None


def carried_start(text: str, start: int, end: int, overlap: int) -> int | None:
    """Where the trailing whole sentences of ``text[start:end]`` within ``overlap`` begin.

    The earliest sentence start ``s`` with ``start < s < end`` and ``end - s <= overlap``,
    or None when even the last sentence is longer than the overlap.
    """
    if overlap <= 0:
        return None
    low = max(start, end - overlap - 1)
    for match in CANDIDATE.finditer(text, low, min(len(text), end + 1)):
        boundary = _boundary(text, match, low)
        if boundary < 0 or boundary > end:
            continue
        begin = _lstrip_from(text, match.end())
        if end - overlap <= begin < end and begin > start:
            return begin
    return None


def last_word_end(text: str, floor: int, limit: int) -> int | None:
    """The end of the last whole word in ``(floor, limit]``, cutting at whitespace."""
    cut = max(text.rfind(space, floor + 1, limit + 1) for space in _SPACES)
    if cut <= floor:
        return None
    end = _rstrip_to(text, cut, floor)
    return end if end > floor else None


def last_clause_end(text: str, floor: int, limit: int) -> int | None:
    """The end of the last Arabic clause (``،``) in ``(floor, limit]``."""
    cut = text.rfind("،", floor, limit)
    return cut + 1 if cut >= floor else None


FENCE = re.compile(r"^[ \t]*(?:```|~~~)", re.MULTILINE)


def fence_lines(text: str) -> list[int]:
    """Start offsets of code-fence lines in document order (openers and closers alternate)."""
    if "```" not in text and "~~~" not in text:
        return []
    return [match.start() for match in FENCE.finditer(text)]
