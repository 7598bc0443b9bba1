"""Cut points near a size limit: sentence ends, the overlap's start, word and clause ends.

:class:`SentenceIndex` holds a document's sentence-end candidates (found once, for the whole
text, by :class:`~worker.chunking.text.density.DocumentProfile`) and answers "last sentence end
before the limit", "first sentence end after the floor" and "where do the trailing sentences
within the overlap begin" by bisection, checking the exceptions of
:func:`~worker.chunking.text.segment.split_sentences` only at the candidates a search reaches.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from worker.chunking.text import terminators
from worker.chunking.text.segment import FENCE, false_stop_at, fence_lines

__all__ = ["FENCE", "SentenceIndex", "fence_lines", "last_clause_end", "last_word_end"]


def _rstrip_to(text: str, end: int, floor: int) -> int:
    """``end`` moved left past whitespace, not below ``floor``."""
    while end > floor and text[end - 1].isspace():
        end -= 1
    return end


def last_word_end(text: str, floor: int, limit: int) -> int | None:
    """The end of the last whole word in ``(floor, limit]``, cutting at whitespace
    (``str.isspace``: soft line breaks included; a hard one always ends a sentence, so a cut
    range never holds one)."""
    cut = text.rfind(" ", floor + 1, limit + 1)
    for at in range(min(limit, len(text) - 1), max(cut, floor), -1):
        if text[at].isspace():
            cut = at
            break
    if cut <= floor:
        return None
    end = _rstrip_to(text, cut, floor)
    return end if end > floor else None


def last_clause_end(text: str, floor: int, limit: int) -> int | None:
    """The end of the last Arabic clause (``،``) in ``(floor, limit]``."""
    cut = text.rfind("،", floor, limit)
    return cut + 1 if cut >= floor else None


_LATIN_MARKS = terminators.LATIN
_CJK_MARKS = terminators.CJK
_LINE_BREAKS = terminators.LINE_BREAKS
_LATIN_CLOSERS = terminators.LATIN_CLOSERS
_CJK_CLOSERS = terminators.CJK_CLOSERS


class SentenceIndex:
    """Sentence ends of one document, from candidates found once for the whole text.

    ``anchors`` (sorted offsets, from :class:`~worker.chunking.text.density.DocumentProfile`) are
    the characters that may end a sentence (soft line breaks already left out); the end of the
    text is one too, whatever precedes it. Each is resolved only when a search reaches it,
    with the rules of :func:`~worker.chunking.text.segment.split_sentences`: a line break always
    ends one; a Latin terminator run with its closing quotes/brackets must be followed by
    whitespace or the end and pass :func:`~worker.chunking.text.segment.false_stop_at`; a CJK run
    takes its closers along; an Arabic mark ends the sentence where it stands. Searches are a
    bisection plus the few resolutions next to the limit, so their cost does not grow with
    the chunk.
    """

    __slots__ = ("anchors", "size", "tail", "text")

    def __init__(self, text: str, anchors: list[int]) -> None:
        self.text = text
        self.size = len(text)
        self.anchors = anchors
        self.tail = _rstrip_to(text, self.size, 0)
        """The end of the text, trailing whitespace left out: always a sentence end."""

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
        tail = self.tail
        if tail <= limit:  # the end of the text is the last sentence end there is
            return tail if tail > floor else None
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
        tail = self.tail
        return tail if floor < tail <= limit else None

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
