"""The ``lexical`` strategy: walk the blocks and ask whether each continues the chunk.

Headings start a section and are chunks of their own; code blocks, tables and front matter
stand alone; a thematic break is attached to a neighbour (the open chunk, else the next
block). Every other block (paragraph, list, block quote, HTML) goes down a fixed ladder, first
match deciding: the size cap, an opening phrase (the longest one decides: a transition ends
the chunk, the others merge), then the other merge reasons in :data:`LADDER`. Chunks are
contiguous slices of the document, at most 1,500 characters. The word lists and limits live
in :mod:`worker.chunking.text.lexicon`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, cast

import msgspec

from worker.chunking import _native as native
from worker.chunking.rules.lexical_words import (
    DocumentWords,
    keyword_count,
    keyword_set,
    word_count,
)
from worker.chunking.text import lexicon
from worker.chunking.text.lexicon import LEXICAL_MAX_CHARS
from worker.chunking.text.markdown import Block, BlockKind, heading_text, split_blocks
from worker.chunking.text.segment import (
    ABBREVIATIONS,
    cap_spans,
    pack_spans,
    split_paragraphs,
    split_sentences,
)
from worker.chunking.text.tokens import CharacterCounter
from worker.chunking.types import Chunk, ContentType, Span

NAME = "lexical"


class LexicalParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`lexical` takes no parameters: its cap and word lists are fixed by design."""


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
_HEADING_TYPE = "heading"
_PROSE_TYPE = "semantic"
"""content_type of heading chunks and of merged prose chunks."""

# Blocks that never merge by the ladder, and the content_type of their chunk. A thematic
# break is attached to a neighbour instead (_Builder.add); it stands alone only when there is
# none it fits with.
_STANDALONE: dict[str, str] = {
    "code": "code_block",
    "table": "table",
    "front_matter": "front_matter",
    "thematic_break": "thematic_break",
}
_THEMATIC = "thematic_break"


_PROSE_KINDS = frozenset({"paragraph", "list", "blockquote"})
"""Blocks whose hard-wrapped lines are read as one line when a block over the cap is cut at
sentences; code, tables, front matter and HTML keep every line break as a cut."""


_TRANSITION_BREAK = "transition_break"
OPENING_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (_TRANSITION_BREAK, lexicon.TRANSITION_PHRASES),
    *lexicon.LADDER_PHRASES.items(),
)
"""Every prefix rule with its phrases, in ladder order."""
# Every phrase of every prefix rule in one pattern, longest first (ties: ladder order), each
# in a group named after its position: the longest phrase a block opens with decides, so that
# "that is" is elaboration and "this means" cause_effect although "that"/"this" open
# reference_continuity, which comes first. A phrase must end at a word edge ("so" does not
# match "some"); re.ASCII keeps case folding to ASCII letters.
_BY_LENGTH = sorted(
    ((phrase, rule) for rule, phrases in OPENING_RULES for phrase in phrases),
    key=lambda pair: -len(pair[0]),
)
_OPENING = re.compile(
    "|".join(
        rf"(?P<p{i}>{re.escape(phrase)}(?![A-Za-z0-9]))" for i, (phrase, _) in enumerate(_BY_LENGTH)
    ),
    re.IGNORECASE | re.ASCII,
)
_RULE_OF_GROUP = {f"p{i}": rule for i, (_, rule) in enumerate(_BY_LENGTH)}
_LEAD_WINDOW = 120
"""Characters at a block's start in which its list/quote markers and first words are read."""
# List bullets, quote marks and emphasis before a block's first word.
_LEAD_MARKERS = re.compile(r"(?:[\s>*+\-_#]|\d{1,9}[.)])*")


@dataclass(slots=True)
class _Unit:
    """A block as the ladder sees it. Its opening rule and keywords are read on demand."""

    kind: BlockKind
    start: int
    end: int
    opening: str | None = None
    """The first prefix rule its opening matches ("" for none), once read."""
    keywords: frozenset[Any] | None = None
    """Its keywords, once read (only the keyword rules need them)."""


@dataclass(slots=True)
class _Open:
    """The chunk being built."""

    units: list[_Unit]
    reasons: list[str] = field(default_factory=list)
    keywords: set[Any] = field(default_factory=set)
    keyed: int = 0
    """How many of ``units`` have their keywords in ``keywords``."""


def _capped(text: str, block: Block) -> list[Span]:
    """The block's span, or its sentence/line-aligned pieces when it passes the cap."""
    if block.end - block.start <= LEXICAL_MAX_CHARS:
        return [Span(block.start, block.end)]
    counter = CharacterCounter()
    inner = text[block.start : block.end]
    sentences = split_sentences(inner, soft_wraps=block.kind in _PROSE_KINDS)
    pieces = [Span(s.start + block.start, s.end + block.start) for s in sentences]
    return pack_spans(
        text, cap_spans(text, pieces, counter, LEXICAL_MAX_CHARS), counter, LEXICAL_MAX_CHARS
    )


def _opening(text: str, unit: _Unit) -> str:
    """The first prefix rule (``transition_break`` included) the unit's opening matches."""
    if unit.opening is None:
        window_end = min(unit.end, unit.start + _LEAD_WINDOW)
        lead = _LEAD_MARKERS.match(text, unit.start, window_end).end()  # type: ignore[union-attr]
        match = _OPENING.match(text, lead, window_end)
        unit.opening = _RULE_OF_GROUP[match.lastgroup or ""] if match is not None else ""
    return unit.opening


def _unit_keywords(text: str, unit: _Unit, words: DocumentWords | None) -> frozenset[Any]:
    if unit.keywords is None:
        if words is not None:
            unit.keywords = words.keywords(unit.start, unit.end)
        else:
            unit.keywords = keyword_set(text[unit.start : unit.end])
    return unit.keywords


def _chunk_keywords(text: str, chunk: _Open, words: DocumentWords | None) -> set[Any]:
    units = chunk.units
    for unit in units[chunk.keyed :]:
        chunk.keywords.update(_unit_keywords(text, unit, words))
    chunk.keyed = len(units)
    return chunk.keywords


def _merge_reason(text: str, chunk: _Open, unit: _Unit, words: DocumentWords | None) -> str | None:
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
    shared = len(_unit_keywords(text, unit, words) & _chunk_keywords(text, chunk, words))
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


def chunk_reference(
    text: str,
    doc_id: str = "",
    source: str = "",
    *,
    content_type: ContentType = "text/plain",
) -> list[Chunk]:
    """The strategy in Python: the reference that defines what ``_lexical_core`` returns."""
    if content_type == "text/markdown":
        blocks = split_blocks(text)
    else:
        blocks = [Block("paragraph", s.start, s.end) for s in split_paragraphs(text)]
    builder = _Builder(text, doc_id, source)
    for block in blocks:
        builder.add(block)
    builder.finish()
    chunks = builder.chunks
    if builder.words is not None and chunks:
        for chunk, value in zip(chunks, builder.words.densities(chunks), strict=True):
            chunk.metadata["keyword_density"] = value
    return chunks


class LexicalChunker:
    """Block-by-block merging by lexical cues; markdown or plain text by content type.

    ``native=False`` always runs the Python reference; otherwise the compiled core runs when
    it is built and allowed (:data:`NATIVE_CHUNK`), with the reference for the documents it hands
    back (None).
    """

    def __init__(self, *, native: bool = True) -> None:
        self._native = NATIVE_CHUNK if native else None

    def chunk(
        self,
        text: str,
        doc_id: str = "",
        source: str = "",
        *,
        content_type: ContentType = "text/plain",
    ) -> list[Chunk]:
        if self._native is not None:
            chunks = self._native(text, doc_id, source, content_type == "text/markdown")
            if chunks is not None:
                return chunks
        return chunk_reference(text, doc_id, source, content_type=content_type)


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
        self.pending: _Unit | None = None
        """A thematic break waiting for the block after it (only while no chunk is open)."""
        self.words = DocumentWords.of(text)

    def add(self, block: Block) -> None:
        text = self.text
        kind = block.kind
        if kind == _THEMATIC:
            self._thematic_break(_Unit(kind, block.start, block.end))
            return
        if kind == "heading":
            self.close()
            title = heading_text(text, block)
            while self.headings and self.headings[-1][0] >= block.level:
                self.headings.pop()
            self.headings.append((block.level, title))
            self.path = [title for _, title in self.headings]
            self.section = (block.level, title)
            for span in _capped(text, block):
                units, reasons = self._after_pending(_Unit("heading", span.start, span.end))
                self._emit(units, reasons, _HEADING_TYPE)
            return
        if kind in _STANDALONE:
            self.close()
            for span in _capped(text, block):
                units, reasons = self._after_pending(_Unit(kind, span.start, span.end))
                self._emit(units, reasons, _STANDALONE[kind], STRUCTURAL)
            return
        if block.end - block.start <= LEXICAL_MAX_CHARS:
            self._walk(_Unit(kind, block.start, block.end))
            return
        for span in _capped(text, block):
            self._walk(_Unit(kind, span.start, span.end))

    def _thematic_break(self, unit: _Unit) -> None:
        """A thematic break ends the open chunk, as its last unit when it fits the cap; with
        no chunk open it waits for the block after it (and a waiting one stands alone)."""
        chunk = self.open
        if chunk is not None and unit.end - chunk.units[0].start <= LEXICAL_MAX_CHARS:
            chunk.units.append(unit)
            chunk.reasons.append(STRUCTURAL)
            self.close()
            return
        self.close()
        self._flush_pending()
        self.pending = unit

    def _after_pending(self, unit: _Unit) -> tuple[list[_Unit], list[str]]:
        """``unit`` with the waiting thematic break before it, when both fit the cap."""
        pending = self.pending
        if pending is None:
            return [unit], []
        self.pending = None
        if unit.end - pending.start <= LEXICAL_MAX_CHARS:
            return [pending, unit], [STRUCTURAL]
        self._emit([pending], [], _STANDALONE[_THEMATIC], STRUCTURAL)
        return [unit], []

    def _flush_pending(self) -> None:
        if self.pending is not None:
            self._emit([self.pending], [], _STANDALONE[_THEMATIC], STRUCTURAL)
            self.pending = None

    def finish(self) -> None:
        """Closes the open chunk; a thematic break still waiting stands alone."""
        self.close()
        self._flush_pending()

    def _walk(self, unit: _Unit) -> None:
        chunk = self.open
        if chunk is None and self.pending is not None:
            units, reasons = self._after_pending(unit)
            self.open = _Open(units, reasons)
            return
        if chunk is not None:
            reason: str | None = None
            if unit.end - chunk.units[0].start <= LEXICAL_MAX_CHARS:
                reason = _merge_reason(self.text, chunk, unit, self.words)
            if reason is not None and reason != _TRANSITION_BREAK:
                chunk.units.append(unit)
                chunk.reasons.append(reason)
                return
            self.close()
        self.open = _Open([unit])

    def close(self) -> None:
        if self.open is not None:
            self._emit(self.open.units, self.open.reasons, _PROSE_TYPE)
            self.open = None

    def _emit(
        self, units: list[_Unit], reasons: list[str], content_type: str, primary: str = ""
    ) -> None:
        start, end = units[0].start, units[-1].end
        body = self.text[start:end]
        # Counted over the whole chunk at once: units are separated by whitespace, so its
        # words and keyword occurrences are exactly those of its units together.
        # With the document's words at hand, all chunks are counted at the end (chunk()).
        density = 0.0
        if self.words is None:
            words = word_count(body)
            density = round(keyword_count(body) / words, 4) if words else 0.0
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
            "keyword_density": density,
            "avg_block_length": average,
        }
        if self.doc_id:
            metadata["doc_id"] = self.doc_id
        if self.source:
            metadata["source"] = self.source
        self.chunks.append(Chunk(body, start, end, end - start, NAME, metadata))


# -- the compiled core ----------------------------------------------------------------------------


def _configure(core: ModuleType) -> None:
    """Hands the compiled core this module's tables (see :mod:`worker.chunking._native`)."""
    if tuple(lexicon.LADDER_PHRASES) != LADDER[:5]:
        raise RuntimeError("lexicon.LADDER_PHRASES must list the prefix rules in LADDER order")
    core.configure(
        chunk_type=Chunk,
        strategy=NAME,
        reasons=(_TRANSITION_BREAK, *LADDER, INITIAL, STRUCTURAL),
        openings=(lexicon.TRANSITION_PHRASES, *lexicon.LADDER_PHRASES.values()),
        standalone=_STANDALONE,
        heading_type=_HEADING_TYPE,
        prose_type=_PROSE_TYPE,
        stop_words=sorted(lexicon.STOP_WORDS),
        abbreviations=sorted(ABBREVIATIONS),
        max_chars=LEXICAL_MAX_CHARS,
        short_paragraph_chars=lexicon.SHORT_PARAGRAPH_CHARS,
        lead_in_max_chars=lexicon.LEAD_IN_MAX_CHARS,
        keyword_min_letters=lexicon.KEYWORD_MIN_LETTERS,
        keyword_overlap_min=lexicon.KEYWORD_OVERLAP_MIN,
        list_keyword_overlap_min=lexicon.LIST_KEYWORD_OVERLAP_MIN,
        lead_window=_LEAD_WINDOW,
    )


NATIVE_CHUNK = cast(
    Callable[[str, str, str, bool], list[Chunk] | None] | None,
    getattr(native.load("_lexical_core", _configure), "chunk", None),
)
"""The configured core's entry point, or None when it is not built (or not allowed)."""
