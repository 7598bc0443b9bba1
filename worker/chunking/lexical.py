"""The ``lexical`` strategy: walk the blocks and ask whether each continues the chunk.

Headings start a section and are chunks of their own; code blocks, tables, front matter and
thematic breaks stand alone. Every other block (paragraph, list, block quote, HTML) goes down
a fixed ladder, first match deciding: the size cap, a transition phrase (ends the chunk),
then the merge reasons in :data:`LADDER`. Chunks are contiguous slices of the document.
The word lists and limits live in :mod:`worker.chunking.lexicon`.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from itertools import compress

from worker.chunking import lexicon
from worker.chunking.lexicon import LEXICAL_MAX_CHARS
from worker.chunking.markdown import Block, BlockKind, heading_text, split_blocks
from worker.chunking.segment import cap_spans, pack_spans, split_paragraphs, split_sentences
from worker.chunking.tokens import CharacterCounter
from worker.chunking.types import Chunk, ContentType, Span

NAME = "lexical"

LADDER = (
    "reference_continuity",
    "elaboration",
    "example",
    "cause_effect",
    "contrast_continuation",
    "question_answer",
    "definition_expansion",
    "short_paragraph",
    "list_continuation",
    "keyword_overlap",
)
"""Merge reasons in the order they are tried, after the size cap and transition_break."""

INITIAL = "initial"
STRUCTURAL = "structural_boundary"

# Blocks that never merge, and the content_type of their chunk.
_STANDALONE: dict[str, str] = {
    "code": "code_block",
    "table": "table",
    "front_matter": "front_matter",
    "thematic_break": "thematic_break",
}


def _alternatives(phrases: tuple[str, ...]) -> str:
    # Longest first so that "for example" is tried before "for"; a phrase must end at a word
    # edge ("so" does not match "some").
    ordered = sorted(phrases, key=len, reverse=True)
    return "|".join(re.escape(p) for p in ordered)


def _prefix_pattern(phrases: tuple[str, ...]) -> re.Pattern[str]:
    # re.ASCII keeps case folding to ASCII letters.
    return re.compile(rf"(?:{_alternatives(phrases)})(?![A-Za-z0-9])", re.IGNORECASE | re.ASCII)


_TRANSITION = _prefix_pattern(lexicon.TRANSITION_PHRASES)
_PREFIX_RULES = tuple(
    (reason, _prefix_pattern(phrases)) for reason, phrases in lexicon.LADDER_PHRASES.items()
)
_TRANSITION_BREAK = "transition_break"
# Every prefix rule in ladder order in one pattern: a block's opening is matched once, and the
# named group that matched is the first rule that fires (alternation is tried left to right,
# exactly like trying the rules one after another).
_OPENING = re.compile(
    "|".join(
        rf"(?P<{name}>(?:{_alternatives(phrases)})(?![A-Za-z0-9]))"
        for name, phrases in (
            (_TRANSITION_BREAK, lexicon.TRANSITION_PHRASES),
            *lexicon.LADDER_PHRASES.items(),
        )
    ),
    re.IGNORECASE | re.ASCII,
)
_LEAD_WINDOW = 120
"""Characters at a block's start in which its list/quote markers and first words are read."""
# List bullets, quote marks and emphasis before a block's first word.
_LEAD_MARKERS = re.compile(r"(?:[\s>*+\-_#]|\d{1,9}[.)])*")
# Runs of at least KEYWORD_MIN_LETTERS letters.
_KEYWORD = re.compile(rf"[^\W\d_]{{{lexicon.KEYWORD_MIN_LETTERS},}}")
# The same runs without the regex engine: ASCII letters lower-cased and every other byte a
# space (see _letter_runs), then split.
_ASCII_LETTERS = bytes(
    c | 0x20 if chr(c).isascii() and chr(c).isalpha() else 0x20 for c in range(256)
)
_ASCII_RUN_MARKS = bytes(0x61 if c != 0x20 else 0x20 for c in range(256))  # on _ASCII_LETTERS
_RUN = b"a" * lexicon.KEYWORD_MIN_LETTERS
_SPACED_RUN = b" " + _RUN
_LONG_ENOUGH = (lexicon.KEYWORD_MIN_LETTERS - 1).__lt__
_STOP_KEYWORDS = frozenset(
    w.encode("ascii") for w in lexicon.STOP_WORDS if len(w) >= lexicon.KEYWORD_MIN_LETTERS
)


_ASCII_BYTES = bytes(range(128))
# A non-ASCII character that is part of a keyword run: what [^\W\d_] accepts.
_KEYWORD_CHAR = re.compile(r"[^\W\d_]")


def _letter_runs(body: str) -> bytes | None:
    """``body`` with ASCII letters lower-cased and every other character a space, or None
    when a non-ASCII character could belong to a keyword (then only the regex is exact).

    Most non-ASCII text in READMEs is punctuation and symbols (dashes, quotes, emoji): those
    separate words exactly like ASCII punctuation, so the byte-level path still applies. The
    non-ASCII characters are found by deleting every ASCII byte (a C-level pass).
    """
    raw = body.encode("utf-8", "surrogatepass")
    if len(raw) != len(body):
        rest = raw.translate(None, _ASCII_BYTES).decode("utf-8", "surrogatepass")
        if _KEYWORD_CHAR.search(rest) is not None:
            return None
    # UTF-8 lead and continuation bytes are all >= 0x80: they become spaces.
    return raw.translate(_ASCII_LETTERS)


# ASCII whitespace (what str.split() cuts at) as " ", every other byte as "a".
_ASCII_WORD_MARKS = bytes(0x20 if chr(c).isspace() else 0x61 for c in range(128)) + b"a" * 128


def _word_count(body: str) -> int:
    """``len(body.split())``, without building the words on ASCII text."""
    if body.isascii():
        marks = body.encode("ascii").translate(_ASCII_WORD_MARKS)
        return marks.count(b" a") + marks.startswith(b"a")
    return len(body.split())


def _keyword_count(body: str) -> int:
    """Keyword occurrences in ``body`` (stop words left out)."""
    letters = _letter_runs(body)
    if letters is not None:
        # Each run of KEYWORD_MIN_LETTERS or more letters is one " aaaa" (or a leading
        # "aaaa") once its letters are all written "a": counted without a Python-level step.
        marks = letters.translate(_ASCII_RUN_MARKS)
        runs = marks.count(_SPACED_RUN) + marks.startswith(_RUN)
        return runs - sum(map(_STOP_KEYWORDS.__contains__, letters.split()))
    found = _KEYWORD.findall(body.lower())
    return len(found) - sum(map(lexicon.STOP_WORDS.__contains__, found))


@dataclass(slots=True)
class _Unit:
    """A block as the ladder sees it. Its opening rule and keywords are read on demand."""

    kind: BlockKind
    start: int
    end: int
    opening: str | None = None
    """The first prefix rule its opening matches ("" for none), once read."""
    keywords: frozenset[str] | None = None
    """Its keywords, once read (only the keyword rules need them)."""


@dataclass(slots=True)
class _Open:
    """The chunk being built."""

    units: list[_Unit]
    reasons: list[str] = field(default_factory=list)
    keywords: set[str] = field(default_factory=set)
    keyed: int = 0
    """How many of ``units`` have their keywords in ``keywords``."""


def _capped(text: str, block: Block) -> list[Span]:
    """The block's span, or its sentence/line-aligned pieces when it passes the cap."""
    if block.end - block.start <= LEXICAL_MAX_CHARS:
        return [Span(block.start, block.end)]
    counter = CharacterCounter()
    inner = text[block.start : block.end]
    pieces = [Span(s.start + block.start, s.end + block.start) for s in split_sentences(inner)]
    return pack_spans(
        text, cap_spans(text, pieces, counter, LEXICAL_MAX_CHARS), counter, LEXICAL_MAX_CHARS
    )


def _opening(text: str, unit: _Unit) -> str:
    """The first prefix rule (``transition_break`` included) the unit's opening matches."""
    if unit.opening is None:
        window_end = min(unit.end, unit.start + _LEAD_WINDOW)
        lead = _LEAD_MARKERS.match(text, unit.start, window_end).end()  # type: ignore[union-attr]
        match = _OPENING.match(text, lead, window_end)
        unit.opening = (match.lastgroup or "") if match is not None else ""
    return unit.opening


def _keyword_set(body: str) -> frozenset[str]:
    """The distinct keywords of ``body`` (stop words left out)."""
    letters = _letter_runs(body)
    if letters is not None:
        runs = list(set(letters.decode("ascii").split()))
        # Runs of at least KEYWORD_MIN_LETTERS letters, filtered without a Python-level loop.
        found = frozenset(compress(runs, map(_LONG_ENOUGH, map(len, runs))))
    else:
        found = frozenset(_KEYWORD.findall(body.lower()))
    return found.difference(lexicon.STOP_WORDS)


def _unit_keywords(text: str, unit: _Unit) -> frozenset[str]:
    if unit.keywords is None:
        unit.keywords = _keyword_set(text[unit.start : unit.end])
    return unit.keywords


def _chunk_keywords(text: str, chunk: _Open) -> set[str]:
    units = chunk.units
    for unit in units[chunk.keyed :]:
        chunk.keywords.update(_unit_keywords(text, unit))
    chunk.keyed = len(units)
    return chunk.keywords


def _merge_reason(text: str, chunk: _Open, unit: _Unit) -> str | None:
    opening = unit.opening
    if opening is None:
        opening = _opening(text, unit)
    if opening:
        return opening
    previous = chunk.units[-1]
    # Units carry no trailing whitespace (their spans are stripped), so the last character
    # is almost always the one that ends the block.
    tail = text[max(previous.start, previous.end - 1) : previous.end]
    if tail.isspace():
        tail = text[previous.start : previous.end].rstrip()[-1:]
    if tail == "?":
        return "question_answer"
    if tail == ":" and previous.end - previous.start <= lexicon.LEAD_IN_MAX_CHARS:
        return "definition_expansion"
    if unit.kind == "paragraph" and unit.end - unit.start <= lexicon.SHORT_PARAGRAPH_CHARS:
        return "short_paragraph"
    shared = len(_unit_keywords(text, unit) & _chunk_keywords(text, chunk))
    if unit.kind == "list" and shared >= lexicon.LIST_KEYWORD_OVERLAP_MIN:
        return "list_continuation"
    if shared >= lexicon.KEYWORD_OVERLAP_MIN:
        return "keyword_overlap"
    return None


def primary_reason(reasons: list[str]) -> str:
    """The reason that fired most; ties go to the name that sorts first."""
    if not reasons:
        return INITIAL
    if len(reasons) == 1:
        return reasons[0]
    counts = Counter(reasons)
    return sorted(counts, key=lambda reason: (-counts[reason], reason))[0]


class LexicalChunker:
    """Block-by-block merging by lexical cues; markdown or plain text by content type."""

    def chunk(
        self,
        text: str,
        doc_id: str = "",
        source: str = "",
        *,
        content_type: ContentType = "text/plain",
    ) -> list[Chunk]:
        if content_type == "text/markdown":
            blocks = split_blocks(text)
        else:
            blocks = [Block("paragraph", s.start, s.end) for s in split_paragraphs(text)]
        builder = _Builder(text, doc_id, source)
        for block in blocks:
            builder.add(block)
        builder.close()
        return builder.chunks


class _Builder:
    """Walks the blocks of one document and emits chunks."""

    def __init__(self, text: str, doc_id: str, source: str) -> None:
        self.text = text
        self.doc_id = doc_id
        self.source = source
        self.chunks: list[Chunk] = []
        self.headings: list[tuple[int, str]] = []
        self.path: list[str] = []
        """The titles of ``headings`` (copied into each chunk's metadata)."""
        self.section: tuple[int, str] = (0, "")
        self.open: _Open | None = None

    def add(self, block: Block) -> None:
        text = self.text
        kind = block.kind
        if kind == "heading":
            self.close()
            title = heading_text(text, block)
            while self.headings and self.headings[-1][0] >= block.level:
                self.headings.pop()
            self.headings.append((block.level, title))
            self.path = [title for _, title in self.headings]
            self.section = (block.level, title)
            for span in _capped(text, block):
                self._emit([_Unit("heading", span.start, span.end)], [], "heading")
            return
        if kind in _STANDALONE:
            self.close()
            for span in _capped(text, block):
                unit = _Unit(kind, span.start, span.end)
                self._emit([unit], [], _STANDALONE[kind], STRUCTURAL)
            return
        if block.end - block.start <= LEXICAL_MAX_CHARS:
            self._walk(_Unit(kind, block.start, block.end))
            return
        for span in _capped(text, block):
            self._walk(_Unit(kind, span.start, span.end))

    def _walk(self, unit: _Unit) -> None:
        chunk = self.open
        if chunk is not None:
            reason: str | None = None
            if unit.end - chunk.units[0].start <= LEXICAL_MAX_CHARS:
                reason = _merge_reason(self.text, chunk, unit)
            if reason is not None and reason != _TRANSITION_BREAK:
                chunk.units.append(unit)
                chunk.reasons.append(reason)
                return
            self.close()
        self.open = _Open([unit])

    def close(self) -> None:
        if self.open is not None:
            self._emit(self.open.units, self.open.reasons, "semantic")
            self.open = None

    def _emit(
        self, units: list[_Unit], reasons: list[str], content_type: str, primary: str = ""
    ) -> None:
        start, end = units[0].start, units[-1].end
        body = self.text[start:end]
        # Counted over the whole chunk at once: units are separated by whitespace, so its
        # words and keyword occurrences are exactly those of its units together.
        words = _word_count(body)
        level, title = self.section
        if len(units) == 1:
            kind = units[0].kind
            kinds = [kind]
            paragraphs = int(kind == "paragraph")
            average = float(end - start)
        else:
            all_kinds = [u.kind for u in units]
            kinds = list(dict.fromkeys(all_kinds))
            paragraphs = all_kinds.count("paragraph")
            average = round(sum([u.end - u.start for u in units]) / len(units), 1)
        metadata: dict[str, object] = {
            "chunk_index": len(self.chunks),
            "content_type": content_type,
            "heading_path": self.path.copy(),
            "section_heading": title,
            "section_level": level,
            "primary_merge_reason": primary or primary_reason(reasons),
            "merge_reasons": list(dict.fromkeys(reasons)) if reasons else [],
            "block_types": kinds,
            "paragraph_count": paragraphs,
            "has_list": "list" in kinds,
            "keyword_density": round(_keyword_count(body) / words, 4) if words else 0.0,
            "avg_block_length": average,
        }
        if self.doc_id:
            metadata["doc_id"] = self.doc_id
        if self.source:
            metadata["source"] = self.source
        self.chunks.append(Chunk(body, start, end, end - start, NAME, metadata))
