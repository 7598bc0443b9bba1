"""Finding one cut point near a size limit, without segmenting the whole document.

A size-driven strategy only needs to know, for each chunk, the last sentence end before its
limit and where the trailing sentences it carries over begin. Both are found by scanning a
small window just behind the limit with the same candidate rules as
:func:`~worker.chunking.segment.split_sentences`, so the cost is per chunk, not per sentence.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right

from worker.chunking.segment import CANDIDATE, false_stop_at, is_false_stop

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
    """Start offsets of code-fence lines in document order (openers and closers alternate).

    The lines :data:`FENCE` matches, found with ``str.find`` (a fence opens a line after at
    most spaces and tabs) rather than by trying the pattern at every line start.
    """
    lines: set[int] = set()
    for marker in ("```", "~~~"):
        at = text.find(marker)
        while at >= 0:
            line_start = text.rfind("\n", 0, at) + 1
            if not text[line_start:at].strip(" \t"):
                lines.add(line_start)
            at = text.find(marker, at + 3)
    return sorted(lines)


_LATIN_MARKS = ".!?…"
_CJK_MARKS = "。！？"
_LINE_BREAKS = "\r\n\u2028\u2029"
_LATIN_CLOSERS = "”’\"'»)]"
_CJK_CLOSERS = "」』”’\"'）)]"


class SentenceIndex:
    """Sentence ends of one document, from candidates found once for the whole text.

    ``anchors`` (sorted offsets, from :class:`~worker.chunking.density.DocumentProfile`) are
    the characters that may end a sentence. Each is resolved only when a search reaches it,
    with the rules of :func:`~worker.chunking.segment.split_sentences`: a line break always
    ends one; a Latin terminator run with its closing quotes/brackets must be followed by
    whitespace or the end and pass :func:`~worker.chunking.segment.false_stop_at`; a CJK run
    takes its closers along; an Arabic mark ends the sentence where it stands. Searches are a
    bisection plus the few resolutions next to the limit, so their cost does not grow with
    the chunk.
    """

    __slots__ = ("anchors", "size", "text")

    def __init__(self, text: str, anchors: list[int]) -> None:
        self.text = text
        self.size = len(text)
        self.anchors = anchors

    def _resolve(self, position: int, sentence_start: int) -> int:
        """The raw end (before whitespace trimming) of the sentence ending at the candidate
        ``position``, or -1 when the candidate does not end a sentence."""
        text = self.text
        ch = text[position]
        if ch in _LINE_BREAKS:
            return position
        size = self.size
        end = position + 1
        if ch in _LATIN_MARKS:
            while end < size and text[end] in _LATIN_CLOSERS:
                end += 1
            if end < size and not text[end].isspace():
                return -1
            mark_start = position
            while mark_start > 0 and text[mark_start - 1] in _LATIN_MARKS:
                mark_start -= 1
            if false_stop_at(text, mark_start, position + 1, end, sentence_start):
                return -1
            return end
        if ch in _CJK_MARKS:
            while end < size and text[end] in _CJK_CLOSERS:
                end += 1
        return end

    def last_end(self, start: int, floor: int, limit: int) -> int | None:
        """The largest sentence end ``e`` with ``floor < e <= limit`` (whitespace trimmed);
        ``start`` is where the chunk begins."""
        anchors = self.anchors
        text = self.text
        k = bisect_right(anchors, limit) - 1
        while k >= 0:
            position = anchors[k]
            if position < start:
                return None
            raw = self._resolve(position, start)
            if 0 <= raw <= limit:
                end = raw
                while end > start and text[end - 1].isspace():
                    end -= 1
                return end if end > floor else None
            k -= 1
        return None

    def first_end(self, floor: int, limit: int) -> int | None:
        """The smallest sentence end ``e`` with ``floor < e <= limit`` (whitespace trimmed)."""
        anchors = self.anchors
        text = self.text
        k = bisect_left(anchors, floor)
        count = len(anchors)
        while k < count and anchors[k] <= limit:
            raw = self._resolve(anchors[k], floor)
            if 0 <= raw <= limit:
                end = raw
                while end > floor and text[end - 1].isspace():
                    end -= 1
                if end > floor:
                    return end
            k += 1
        return None

    def carried_start(self, start: int, end: int, overlap: int) -> int | None:
        """Where the trailing whole sentences of ``text[start:end]`` within ``overlap`` begin:
        the earliest sentence start ``s`` with ``start < s < end`` and ``end - s <= overlap``,
        or None."""
        if overlap <= 0:
            return None
        anchors = self.anchors
        text = self.text
        size = self.size
        low = end - overlap - 1
        k = bisect_left(anchors, low if low > start else start)
        count = len(anchors)
        while k < count and anchors[k] < end:
            raw = self._resolve(anchors[k], start)
            k += 1
            if raw < 0 or raw > end:
                continue
            begin = raw
            while begin < size and text[begin].isspace():
                begin += 1
            if begin >= end:
                return None
            if begin >= end - overlap and begin > start:
                return begin
        return None
