"""Units with their sizes: the blocks of :mod:`.structure`, paragraphs cut into sentences, and
anything over the unit limit cut into lines, words, then characters.

A :class:`Measure` gives the size of any range between units, in characters or in a model's
tokens. Tokens are counted per *piece* (a run of characters between the tokenizer's own
whitespace, also ended after a sentence mark), once per document, and a range's size is the
sum of its pieces: exact for tokenizers whose pre-tokenizer splits at whitespace and isolates
punctuation (BERT's; :mod:`.tokens` refuses others), so no candidate chunk is ever re-counted.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from functools import partial
from itertools import accumulate

import msgspec

from worker.chunking.text import terminators
from worker.chunking.text.segment import CANDIDATE, is_false_stop
from worker.chunking.text.structure import (
    CHAR,
    CLAUSE,
    HEADING,
    LINE,
    PARAGRAPH,
    RULE,
    SENTENCE,
    WORD,
    gap_level,
    read_blocks,
)
from worker.chunking.text.tokens import NOT_SEPARATORS, PieceCounter
from worker.chunking.text.word_cuts import cut_word

MARKS = "".join(sorted(set(terminators.ALL + terminators.LATIN_CLOSERS + terminators.CJK_CLOSERS)))
"""Characters after which a token piece ends (each is punctuation to a BERT pre-tokenizer, so
counts stay additive there) and a gap between units may be cut in tokens."""
_MARK = f"[{re.escape(MARKS)}]"
_SOLID = f"[^\\s{re.escape(MARKS)}]"
_PIECE = re.compile(
    f"{_SOLID}(?:(?:{_SOLID}|[{re.escape(NOT_SEPARATORS)}])*{_SOLID})?{_MARK}?|{_MARK}"
)
"""A token piece: characters that are not whitespace, where the tokenizer's ignored controls
(:data:`.tokens.NOT_SEPARATORS`) inside join their neighbours (it drops them), ended by a
mark; it starts and ends at a non-space character, as units do."""
HASH_REACH = 12
"""Characters on each side of a gap that its hash reads (within the two units)."""


class Units(msgspec.Struct):
    """Units in document order: ``starts[k]``/``ends[k]`` (stripped), ``levels[k]`` the level
    of the gap before unit ``k`` (``levels[0]`` unused), ``hashes[k]`` 16 bits of that gap's
    hash, and the size of the document before each unit's start and end (``before_start``,
    ``before_end``: a range's size is a difference of two of them)."""

    starts: list[int]
    ends: list[int]
    levels: list[int]
    hashes: list[int]
    before_start: list[int]
    before_end: list[int]
    headings: list[bool]
    """Whether each unit is (part of) a heading or rule line."""
    blocks: list[int]
    """The index, in :func:`.structure.read_blocks`'s list, of the block each unit is (part of)."""


class Measure:
    """Sizes of ranges of one document: characters, or tokens summed over pieces."""

    def __init__(self, text: str, counter: PieceCounter | None) -> None:
        self.text = text
        self.tokens = counter is not None
        self.counter = counter
        if counter is None:
            return
        spans = [(m.start(), m.end()) for m in _PIECE.finditer(text)]
        counts = counter.count_pieces([text[a:b] for a, b in spans])
        self._ends = [b for _, b in spans]
        self._cumulative = [0, *accumulate(counts)]

    def before(self, position: int) -> int:
        """The size of ``text[:position]`` (tokens: of the pieces that end by ``position``;
        ``position`` must not fall inside a piece)."""
        if not self.tokens:
            return position
        return self._cumulative[bisect_left(self._ends, position + 1)]

    def size(self, start: int, end: int) -> int:
        return self.before(end) - self.before(start)

    def advance(self, start: int, amount: int) -> int:
        """The end of the longest stretch from ``start`` (between pieces) of at most
        ``amount``: in characters ``start + amount`` (within the text); in tokens the end of
        the last whole piece it holds (``start`` when the first piece is larger)."""
        if not self.tokens:
            return min(start + amount, len(self.text))
        first = bisect_left(self._ends, start + 1)
        last = bisect_right(self._cumulative, self._cumulative[first] + amount) - 1
        return self._ends[last - 1] if last > first else start

    def separates(self, start: int, end: int) -> bool:
        """Whether a cut in the gap ``text[start:end]`` between two units leaves every piece
        whole: always in characters; in tokens when the gap holds a separator or follows a
        mark (where a piece ends)."""
        if not self.tokens:
            return True
        if start > 0 and self.text[start - 1] in MARKS:
            return True
        return any(c.isspace() and c not in NOT_SEPARATORS for c in self.text[start:end])

    def refine(self, pieces: list[tuple[int, int]], counts: list[int]) -> None:
        """Replaces the one piece that ``pieces`` cut at characters by those pieces, each
        with its exact count (a range holding two of them never counts as their sum: packing
        always cuts between them)."""
        first = bisect_left(self._ends, pieces[0][0] + 1)
        counts_before = [
            b - a for a, b in zip(self._cumulative, self._cumulative[1:], strict=False)
        ]
        self._ends[first : first + 1] = [b for _, b in pieces]
        counts_before[first : first + 1] = counts
        self._cumulative = [0, *accumulate(counts_before)]

    def exact(self, start: int, end: int) -> int:
        """The tokens of ``text[start:end]`` counted as one text (for cuts inside a piece)."""
        assert self.counter is not None
        return self.counter.count_exact(self.text[start:end])


_SEPARATORS = re.compile(f"[^\\S{re.escape(NOT_SEPARATORS)}]+")
"""Whitespace where token counts add up (the tokenizer's ignored controls are not)."""


def piece_sums(counter: PieceCounter) -> Callable[[str], int]:
    """A text's tokens as a sum over its whitespace-separated parts (exact for the tokenizers
    :mod:`.tokens` accepts, as :class:`Measure`'s sums are), from the counter's memory and its
    WordPiece path: a long run costs no tokenization of its own."""

    def count(text: str) -> int:
        if any(control in text for control in NOT_SEPARATORS):
            parts = [part for part in _SEPARATORS.split(text) if part]
        else:
            parts = text.split()
        return sum(counter.count_pieces(parts))

    return count


def paragraph_sentences(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The sentences of the paragraph ``text[start:end]``: :func:`.segment.split_sentences`'s
    candidates and exceptions, with every line break a soft wrap (whitespace)."""
    spans: list[tuple[int, int]] = []
    begin = start
    for match in CANDIDATE.finditer(text, start, end):
        if match.group("line") is not None:
            continue
        if match.group("latin") is not None and is_false_stop(text, match, begin):
            continue
        _append_stripped(text, spans, begin, match.end())
        begin = match.end()
    _append_stripped(text, spans, begin, end)
    return spans


def _append_stripped(text: str, spans: list[tuple[int, int]], start: int, end: int) -> None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if start < end:
        spans.append((start, end))


def _lines(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The lines of ``text[start:end]``, stripped, blank ones left out; a fenced block inside
    (a list item's code) stays one piece, from its opening fence line to its closing one (a
    fenced code block's own lines are lines: it starts with its fence)."""
    spans: list[tuple[int, int]] = []
    at = start
    while at < end:
        stop = _line_end(text, at, end)
        if at > start and _fence_at(text, at, stop):
            closing = stop + 1
            while closing < end and not _fence_at(text, closing, _line_end(text, closing, end)):
                closing = _line_end(text, closing, end) + 1
            stop = _line_end(text, closing, end) if closing < end else end
        _append_stripped(text, spans, at, stop)
        at = stop + 1
    return spans


def _line_end(text: str, at: int, end: int) -> int:
    stop = text.find("\n", at, end)
    return end if stop < 0 else stop


def _fence_at(text: str, at: int, stop: int) -> bool:
    """Whether the line ``text[at:stop]`` is a fence line (structure's definition)."""
    while at < stop and text[at] in " \t":
        at += 1
    return text.startswith("```", at, stop) or text.startswith("~~~", at, stop)


def _words(text: str, start: int, end: int, tokens: bool) -> list[tuple[int, int]]:
    """Runs between separators (in tokens: the pieces of :class:`Measure`)."""
    pattern = _PIECE if tokens else _NOT_SPACE
    return [(m.start(), m.end()) for m in pattern.finditer(text, start, end)]


ARABIC_COMMA = "\u060c"


def _clauses(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """``text[start:end]`` cut after every Arabic comma that a separator follows (whitespace
    but the ignored controls of :data:`.tokens.NOT_SEPARATORS`: in tokens the cut then falls
    between pieces), stripped."""
    spans: list[tuple[int, int]] = []
    begin = start
    at = text.find(ARABIC_COMMA, start, end)
    while at >= 0:
        if at + 1 < end and text[at + 1].isspace() and text[at + 1] not in NOT_SEPARATORS:
            _append_stripped(text, spans, begin, at + 1)
            begin = at + 1
        at = text.find(ARABIC_COMMA, at + 1, end)
    _append_stripped(text, spans, begin, end)
    return spans


_NOT_SPACE = re.compile(r"\S+")
# What a range over the limit is cut into next.
_BLOCK, _TEXT, _CLAUSE, _WORD = 0, 1, 2, 3


def read_units(
    text: str,
    measure: Measure,
    limit: int,
    cap: int,
    *,
    whole_paragraphs: bool = False,
    clauses: bool = False,
    blocks: list[tuple[int, int, int]] | None = None,
) -> Units:
    """The units of ``text``, none larger than ``limit`` but words of at most ``cap``: a block
    unit over the limit is cut into lines, a sentence or line into words, a word over ``cap``
    into characters (:func:`.word_cuts.cut_word`: the longest prefixes of at most ``cap``
    characters, or tokens counted exactly, between grapheme clusters; in tokens with
    :data:`FORCED` gaps between them, since two of them together would not count as their sum).

    ``whole_paragraphs``: a paragraph within the cap is one unit, like any other block (else a
    paragraph is always its sentences). ``clauses``: a sentence or line over the limit is cut
    after its Arabic commas (:data:`.structure.CLAUSE` gaps) before its words. ``blocks``:
    :func:`.structure.read_blocks` of ``text`` when the caller has read them already."""
    flat: list[_Raw] = []
    previous: tuple[int, int, int] | None = None
    if blocks is None:
        blocks = read_blocks(text)
    for index, block in enumerate(blocks):
        level = SENTENCE if previous is None else gap_level(previous, block, text)
        if block[0] == PARAGRAPH and not (
            whole_paragraphs and measure.size(block[1], block[2]) <= cap
        ):
            for k, (a, b) in enumerate(paragraph_sentences(text, block[1], block[2])):
                flat.append((a, b, level if k == 0 else SENTENCE, False, False, index))
        else:
            heading = block[0] in (HEADING, RULE)
            flat.append((block[1], block[2], level, True, heading, index))
        previous = block
    units: list[_Unit] = []
    for start, end, level, whole_block, heading, index in _join_uncuttable(flat, measure):
        depth = _BLOCK if whole_block else _TEXT
        unit = (start, end, level, heading, index)
        _split(text, measure, (limit, cap, clauses), unit, depth, units)
    return _finish(text, measure, units)


_Raw = tuple[int, int, int, bool, bool, int]
"""A unit before splitting: start, end, level before, whether it is a whole block, whether it
is a heading or rule line (a chunk of nothing else is never cut off: packing), its block."""
_Unit = tuple[int, int, int, bool, int]
"""A unit: start, end, level before, heading, block."""


FORCED = -1
"""The level of a gap between two character pieces of one token piece: always a cut."""


def _join_uncuttable(flat: list[_Raw], measure: Measure) -> list[_Raw]:
    """Units whose gap a cut may not take (in tokens, it would split a piece) made one."""
    joined: list[_Raw] = []
    for unit in flat:
        if joined and not measure.separates(joined[-1][1], unit[0]):
            start, _, level, _, heading, index = joined[-1]
            joined[-1] = (start, unit[1], level, True, heading and unit[4], index)
        else:
            joined.append(unit)
    return joined


def _split(
    text: str,
    measure: Measure,
    bounds: tuple[int, int, bool],
    unit: _Unit,
    depth: int,
    out: list[_Unit],
) -> None:
    """Appends ``unit`` whole, or cut one step finer (``bounds``: limit, cap, clauses)."""
    limit, cap, clauses = bounds
    start, end, level, heading, index = unit
    size = measure.size(start, end)
    if size <= limit or (depth in (_WORD, _BLOCK) and size <= cap):
        out.append(unit)
        return
    if depth == _WORD:
        pieces = _characters(measure, cap, start, end)
        inner = FORCED if measure.tokens else CHAR
        for k, (a, b) in enumerate(pieces):
            out.append((a, b, level if k == 0 else inner, heading, index))
        return
    if depth == _BLOCK:
        parts, inner, deeper = _lines(text, start, end), LINE, _TEXT
    elif depth == _TEXT and clauses:
        parts, inner, deeper = _clauses(text, start, end), CLAUSE, _CLAUSE
    else:
        parts, inner, deeper = _words(text, start, end, measure.tokens), WORD, _WORD
    for k, (a, b) in enumerate(parts):
        part = (a, b, level if k == 0 else inner, heading, index)
        _split(text, measure, bounds, part, deeper, out)


def _characters(measure: Measure, cap: int, start: int, end: int) -> list[tuple[int, int]]:
    """A word over the cap cut at characters (see :func:`read_units`)."""
    counter = measure.counter
    cuts = cut_word(None if counter is None else counter.count_exact, measure.text, start, end, cap)
    pieces = [(a, b) for a, b, _ in cuts]
    if counter is not None:
        measure.refine(pieces, [count for _, _, count in cuts])
    return pieces


WordCutter = Callable[[str, int, int, int], list[tuple[int, int, int]]]
"""text, start, end, cap -> :func:`.word_cuts.cut_word`'s pieces (the compiled cores'
``cut_word``)."""


def word_cutter(counter: PieceCounter | None) -> WordCutter:
    """:func:`.word_cuts.cut_word` in ``counter``'s tokens (characters when None): what the
    compiled cores call for a word over the cap."""
    return partial(cut_word, None if counter is None else counter.count_exact)


def _finish(text: str, measure: Measure, units: list[_Unit]) -> Units:
    starts = [u[0] for u in units]
    ends = [u[1] for u in units]
    levels = [u[2] for u in units]
    hashes = [0] + [
        gap_hash(text, starts[k - 1], ends[k - 1], starts[k], ends[k]) for k in range(1, len(units))
    ]
    return Units(
        starts,
        ends,
        levels,
        hashes,
        [measure.before(s) for s in starts],
        [measure.before(e) for e in ends],
        [u[3] for u in units],
        [u[4] for u in units],
    )


def gap_hash(
    text: str, start_before: int, end_before: int, start_after: int, end_after: int
) -> int:
    """16 bits of FNV-1a over the code points around a gap: the letters and digits
    (``str.isalnum``) among the last :data:`HASH_REACH` characters of the unit before it and
    the first of the unit after it. Spaces and punctuation are left out, so that a line
    wrapped differently or a sentence that gains its final period hashes alike."""
    h = 0x811C9DC5
    for a, b in ((max(start_before, end_before - HASH_REACH), end_before),
                 (start_after, min(end_after, start_after + HASH_REACH))):  # fmt: skip
        for c in text[a:b]:
            if c.isalnum():
                h = ((h ^ ord(c)) * 0x01000193) & 0xFFFFFFFF
    return h >> 16
