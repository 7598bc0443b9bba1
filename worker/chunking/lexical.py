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


def _prefix_pattern(phrases: tuple[str, ...]) -> re.Pattern[str]:
    # Longest first so that "for example" is tried before "for"; a phrase must end at a word
    # edge ("so" does not match "some"). re.ASCII keeps case folding to ASCII letters.
    ordered = sorted(phrases, key=len, reverse=True)
    alternatives = "|".join(re.escape(p) for p in ordered)
    return re.compile(rf"(?:{alternatives})(?![A-Za-z0-9])", re.IGNORECASE | re.ASCII)


_TRANSITION = _prefix_pattern(lexicon.TRANSITION_PHRASES)
_PREFIX_RULES = tuple(
    (reason, _prefix_pattern(phrases)) for reason, phrases in lexicon.LADDER_PHRASES.items()
)
# List bullets, quote marks and emphasis before a block's first word.
_LEAD_MARKERS = re.compile(r"(?:[\s>*+\-_#]|\d{1,9}[.)])*")
_KEYWORD = re.compile(rf"[^\W\d_]{{{lexicon.KEYWORD_MIN_LETTERS},}}")


@dataclass(slots=True)
class _Unit:
    """A block as the ladder sees it."""

    kind: BlockKind
    start: int
    end: int
    lead: str
    keywords: frozenset[str]
    keyword_count: int
    word_count: int


@dataclass(slots=True)
class _Open:
    """The chunk being built."""

    units: list[_Unit]
    reasons: list[str] = field(default_factory=list)
    keywords: set[str] = field(default_factory=set)


def _unit(text: str, kind: BlockKind, start: int, end: int) -> _Unit:
    body = text[start:end]
    head = body[:120]
    lead = head[_LEAD_MARKERS.match(head).end() :]  # type: ignore[union-attr]
    found = [w for w in _KEYWORD.findall(body.lower()) if w not in lexicon.STOP_WORDS]
    return _Unit(kind, start, end, lead, frozenset(found), len(found), len(body.split()))


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


def _merge_reason(text: str, chunk: _Open, unit: _Unit) -> str | None:
    lead = unit.lead
    for reason, pattern in _PREFIX_RULES:
        if pattern.match(lead):
            return reason
    previous = chunk.units[-1]
    tail = text[previous.start : previous.end].rstrip()
    if tail.endswith("?"):
        return "question_answer"
    if tail.endswith(":") and previous.end - previous.start <= lexicon.LEAD_IN_MAX_CHARS:
        return "definition_expansion"
    if unit.kind == "paragraph" and unit.end - unit.start <= lexicon.SHORT_PARAGRAPH_CHARS:
        return "short_paragraph"
    shared = len(unit.keywords & chunk.keywords)
    if unit.kind == "list" and shared >= lexicon.LIST_KEYWORD_OVERLAP_MIN:
        return "list_continuation"
    if shared >= lexicon.KEYWORD_OVERLAP_MIN:
        return "keyword_overlap"
    return None


def primary_reason(reasons: list[str]) -> str:
    """The reason that fired most; ties go to the name that sorts first."""
    if not reasons:
        return INITIAL
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
        self.open: _Open | None = None

    def add(self, block: Block) -> None:
        text = self.text
        if block.kind == "heading":
            self.close()
            title = heading_text(text, block)
            while self.headings and self.headings[-1][0] >= block.level:
                self.headings.pop()
            self.headings.append((block.level, title))
            for span in _capped(text, block):
                self._emit([_unit(text, "heading", span.start, span.end)], [], "heading")
            return
        if block.kind in _STANDALONE:
            self.close()
            for span in _capped(text, block):
                unit = _unit(text, block.kind, span.start, span.end)
                self._emit([unit], [], _STANDALONE[block.kind], STRUCTURAL)
            return
        for span in _capped(text, block):
            self._walk(_unit(text, block.kind, span.start, span.end))

    def _walk(self, unit: _Unit) -> None:
        chunk = self.open
        if chunk is not None:
            reason: str | None = None
            fits = unit.end - chunk.units[0].start <= LEXICAL_MAX_CHARS
            if fits and not _TRANSITION.match(unit.lead):
                reason = _merge_reason(self.text, chunk, unit)
            if reason is not None:
                chunk.units.append(unit)
                chunk.reasons.append(reason)
                chunk.keywords.update(unit.keywords)
                return
            self.close()
        self.open = _Open([unit], keywords=set(unit.keywords))

    def close(self) -> None:
        if self.open is not None:
            self._emit(self.open.units, self.open.reasons, "semantic")
            self.open = None

    def _emit(
        self, units: list[_Unit], reasons: list[str], content_type: str, primary: str = ""
    ) -> None:
        start, end = units[0].start, units[-1].end
        body = self.text[start:end]
        words = sum(u.word_count for u in units)
        keywords = sum(u.keyword_count for u in units)
        kinds = list(dict.fromkeys(u.kind for u in units))
        heading = self.headings[-1] if self.headings else (0, "")
        metadata: dict[str, object] = {
            "chunk_index": len(self.chunks),
            "content_type": content_type,
            "heading_path": [title for _, title in self.headings],
            "section_heading": heading[1],
            "section_level": heading[0],
            "primary_merge_reason": primary or primary_reason(reasons),
            "merge_reasons": list(dict.fromkeys(reasons)),
            "block_types": kinds,
            "paragraph_count": sum(u.kind == "paragraph" for u in units),
            "has_list": "list" in kinds,
            "keyword_density": round(keywords / words, 4) if words else 0.0,
            "avg_block_length": round(sum(u.end - u.start for u in units) / len(units), 1),
        }
        if self.doc_id:
            metadata["doc_id"] = self.doc_id
        if self.source:
            metadata["source"] = self.source
        self.chunks.append(
            Chunk(
                text=body,
                start_index=start,
                end_index=end,
                token_count=len(body),
                strategy=NAME,
                metadata=metadata,
            )
        )
