"""The ``lexical`` strategy: walk the blocks and ask whether each continues the chunk.

The document is read into the blocks and units of every rule strategy
(:mod:`..text.structure`, :mod:`..text.units`: headings, paragraphs, code blocks, tables, list
items, quotes, thematic breaks; a block within the cap is one unit, a larger one is cut into
its sentences or lines). Each gap between two blocks gets a verdict from the ladder
(:mod:`.lexical_ladder`): a merge reason (a heading joins its section, a ``:`` line what it
introduces, an opening phrase, a question, a short paragraph, shared keywords) or a break (a
new section, a transition phrase, nothing in common). Breaks are the anchors of the
content-defined packing (:mod:`..text.packing`): a run of merged blocks within the cap is one
chunk, a longer one is cut where the sizes and the text say, and a run under the minimum (an
eighth of the cap) joins its neighbour (``minimum_size``). So no heading stands alone, no
chunk is a crumb, and an edit moves only the chunks near it.

Every chunk says why its blocks are together: ``merge_reasons`` lists the reasons of the block
gaps inside it in order, ``primary_merge_reason`` the most frequent (``initial`` for one block).
Sizes are in the unit of ``tokenizer`` (characters, or a model's tokens; unset: the retrieval
model's when the worker has one), the cap ``chunk_size`` (1,500 characters or the model's
window). The word lists and limits live in :mod:`worker.chunking.text.lexicon`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from types import ModuleType
from typing import Annotated, cast

import msgspec

from worker.chunking import _native as native
from worker.chunking.rules.lexical_ladder import (
    HEADING_SECTION,
    LADDER,
    LEAD_WINDOW,
    OPENING_RULES,
    STRUCTURAL,
    TRANSITION_BREAK,
    verdicts,
)
from worker.chunking.rules.lexical_words import DocumentWords, keyword_count, word_count
from worker.chunking.rules.sizing import Sizing, own_sizing
from worker.chunking.text import lexicon
from worker.chunking.text.character_cap import cap_chunks
from worker.chunking.text.lexicon import LEXICAL_MAX_CHARS
from worker.chunking.text.packing import Sizes, is_anchor, pack
from worker.chunking.text.segment import ABBREVIATIONS
from worker.chunking.text.structure import (
    CODE,
    HEADING,
    HTML,
    ITEM_BLOCK,
    PARAGRAPH,
    QUOTE,
    RULE,
    TABLE,
    read_blocks,
)
from worker.chunking.text.units import Measure, Units, WordCutter, read_units
from worker.chunking.types import Chunk, ContentType, Metadata

__all__ = ["LADDER", "OPENING_RULES", "LexicalChunker", "LexicalParams"]

NAME = "lexical"


class LexicalParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    chunk_size: Annotated[int, msgspec.Meta(ge=1)] | None = None
    """Hard cap per chunk in the unit of ``tokenizer``; unset: 1,500 characters, the model's
    window in tokens (a larger value is lowered to the window)."""
    tokenizer: Annotated[str, msgspec.Meta(min_length=1)] | None = None
    """``"character"``, a ``tokenizer.json``, or a model directory; unset: the retrieval
    model's tokens when the worker has one, else characters."""


INITIAL = "initial"
MINIMUM = "minimum_size"
"""Blocks joined across a break because the run on one side was under the minimum (or only
headings)."""
REASONS = (TRANSITION_BREAK, *LADDER, INITIAL, STRUCTURAL, HEADING_SECTION, MINIMUM)
"""Every name a chunk's reasons are made of (transition_break only ever breaks)."""
KIND_NAMES = {
    PARAGRAPH: "paragraph",
    HEADING: "heading",
    RULE: "thematic_break",
    CODE: "code",
    TABLE: "table",
    ITEM_BLOCK: "list",
    QUOTE: "blockquote",
    HTML: "html",
}
"""``block_types`` of each block kind."""
_HEADING_TYPE, _PROSE_TYPE = "heading", "semantic"
# content_type of a chunk whose blocks (headings and thematic breaks aside) are all of one
# of these kinds.
_ALONE_TYPES = {CODE: "code_block", TABLE: "table"}


def primary_reason(reasons: list[str]) -> str:
    """The reason that fired most; ties go to the name that sorts first."""
    if not reasons:
        return INITIAL
    if len(reasons) == 1:
        return reasons[0]
    counts = Counter(reasons)
    return sorted(counts, key=lambda reason: (-counts[reason], reason))[0]


def heading_title(text: str, start: int, end: int) -> tuple[int, str]:
    """A heading block's level and words: an ATX heading's ``#`` marks (and closing ones) left
    out; a setext or reStructuredText heading's underline left out, level 1 for ``=`` and 2
    for any other rule character. Whitespace folded."""
    raw = text[start:end]
    if raw.startswith("#"):
        marks = len(raw) - len(raw.lstrip("#"))
        body = raw[marks:]
        closing = len(body) - len(body.rstrip("#"))
        if closing and (closing == len(body) or body[-closing - 1] in " \t"):
            body = body[:-closing]
        return marks, " ".join(body.split())
    cut = raw.rfind("\n")
    level = 1 if raw[cut + 1 :].lstrip().startswith("=") else 2
    return level, " ".join(raw[: max(cut, 0)].split())


def _own_density(metadata: Metadata, text: str) -> Metadata:
    """A piece cut for the character cap: its own ``keyword_density``."""
    count = word_count(text)
    metadata["keyword_density"] = round(keyword_count(text) / count, 4) if count else 0.0
    return metadata


def anchors(units: Units, found: list[str | None]) -> list[bool]:
    """Packing's anchors: every break between two blocks, and inside a block too large for
    one chunk the gaps :func:`..text.packing.is_anchor` picks (a share of its line breaks)."""
    blocks = units.blocks
    return [
        k > 0
        and (
            found[blocks[k]] is None
            if blocks[k] != blocks[k - 1]
            else is_anchor(units.levels[k], units.hashes[k])
        )
        for k in range(len(blocks))
    ]


def _densities(text: str, chunks: list[Chunk], words: DocumentWords | None) -> list[float]:
    """``keyword_density`` of every chunk: keyword occurrences over words in its text (by the
    document's words when every chunk edge falls between words, which counts the same)."""
    if words is not None and all(_at_word_edges(text, c) for c in chunks):
        return words.densities(chunks)
    found = []
    for chunk in chunks:
        count = word_count(chunk.text)
        found.append(round(keyword_count(chunk.text) / count, 4) if count else 0.0)
    return found


def _at_word_edges(text: str, chunk: Chunk) -> bool:
    start, end = chunk.start_index, chunk.end_index
    return (start == 0 or text[start - 1].isspace()) and (end == len(text) or text[end].isspace())


class _Assembly:
    """The chunks of a packed document with their metadata."""

    def __init__(
        self,
        text: str,
        blocks: list[tuple[int, int, int]],
        units: Units,
        found: list[str | None],
        doc_id: str,
        source: str,
    ) -> None:
        self.text, self.blocks, self.units, self.found = text, blocks, units, found
        self.extra: dict[str, object] = {}
        if doc_id:
            self.extra["doc_id"] = doc_id
        if source:
            self.extra["source"] = source
        self.headings: list[tuple[int, str]] = []
        self.read = 0
        """Blocks whose headings are in ``headings``."""

    def chunks(self, groups: list[tuple[int, int]]) -> list[Chunk]:
        return [self._chunk(k, first, last) for k, (first, last) in enumerate(groups)]

    def _path(self, through: int) -> list[tuple[int, str]]:
        """The heading stack after block ``through``."""
        while self.read <= through:
            kind, start, end = self.blocks[self.read]
            if kind == HEADING:
                level, title = heading_title(self.text, start, end)
                while self.headings and self.headings[-1][0] >= level:
                    self.headings.pop()
                self.headings.append((level, title))
            self.read += 1
        return self.headings

    def _chunk(self, index: int, first: int, last: int) -> Chunk:
        units, blocks = self.units, self.blocks
        start, end = units.starts[first], units.ends[last]
        touched = list(dict.fromkeys(units.blocks[first : last + 1]))
        reasons = [
            MINIMUM if self.found[b] is None else cast(str, self.found[b]) for b in touched[1:]
        ]
        content = [u for u in range(first, last + 1) if not units.headings[u]]
        path = self._path(units.blocks[content[0] if content else last])
        level, title = path[-1] if path else (0, "")
        kinds = [blocks[b][0] for b in touched]
        names = list(dict.fromkeys(KIND_NAMES[kind] for kind in kinds))
        parts = [min(blocks[b][2], end) - max(blocks[b][1], start) for b in touched]
        average = float(parts[0]) if len(parts) == 1 else round(sum(parts) / len(parts), 1)
        metadata: dict[str, object] = {
            "chunk_index": index,
            "content_type": _content_type(kinds),
            "heading_path": [t for _, t in path],
            "section_heading": title,
            "section_level": level,
            "primary_merge_reason": primary_reason(reasons),
            "merge_reasons": list(dict.fromkeys(reasons)),
            "block_types": names,
            "paragraph_count": kinds.count(PARAGRAPH),
            "has_list": "list" in names,
            "keyword_density": 0.0,
            "avg_block_length": average,
        }
        metadata.update(self.extra)
        size = units.before_end[last] - units.before_start[first]
        return Chunk(self.text[start:end], start, end, size, NAME, metadata)


def _content_type(kinds: list[int]) -> str:
    """``code_block`` or ``table`` when every block but headings and thematic breaks is of
    that kind, ``heading`` when there are only headings and breaks, else ``semantic``."""
    content = {k for k in kinds if k not in (HEADING, RULE)}
    if not content:
        return _HEADING_TYPE
    if len(content) == 1:
        return _ALONE_TYPES.get(content.pop(), _PROSE_TYPE)
    return _PROSE_TYPE


class LexicalChunker:
    """Block-by-block merging by lexical cues, content-defined cuts (module docstring).

    :meth:`chunk_reference` is the definition; the compiled core gives the same chunks, and
    :meth:`chunk` runs it when it is built and the switch is on (:mod:`worker.chunking._native`),
    with the reference for the documents it hands back (None).
    """

    def __init__(self, params: LexicalParams | None = None, sizing: Sizing | None = None) -> None:
        self.params = params or LexicalParams()
        self.sizing = own_sizing(self.params.tokenizer) if sizing is None else sizing
        self.sizes = Sizes(self.sizing.cap(self.params.chunk_size, characters=LEXICAL_MAX_CHARS))
        self.characters = self.sizing.character_cap(self.sizes.cap)
        """The hard cap in characters beside the cap in tokens (None in characters)."""

    @property
    def resolved(self) -> LexicalParams:
        """The parameters with the unset sizes as this chunker resolved them in its unit."""
        return msgspec.structs.replace(self.params, chunk_size=self.sizes.cap)

    def chunk(
        self,
        text: str,
        doc_id: str = "",
        source: str = "",
        *,
        content_type: ContentType = "text/plain",
    ) -> list[Chunk]:
        core, measured = compiled(), native.measured_by(self.sizing.counter)
        if core is not None and measured is not None:
            chunks = core(text, doc_id, source, self.sizes.cap, *measured)
            if chunks is not None:
                return cap_chunks(text, chunks, self.characters, self.sizes.cap, _own_density)
        return self.chunk_reference(text, doc_id, source, content_type=content_type)

    def chunk_reference(
        self,
        text: str,
        doc_id: str = "",
        source: str = "",
        *,
        content_type: ContentType = "text/plain",
    ) -> list[Chunk]:
        """The strategy in Python: the reference that defines what ``_lexical_core`` returns.
        ``content_type`` is accepted for the registry's contract: plain text and markdown are
        read alike."""
        sizes = self.sizes
        measure = Measure(text, self.sizing.counter)
        blocks = read_blocks(text)
        units = read_units(
            text, measure, sizes.limit, sizes.cap, whole_paragraphs=True, blocks=blocks
        )
        words = DocumentWords.of(text)
        before = [measure.before(start) for _, start, _ in blocks]
        found = verdicts(text, blocks, before, sizes.cap, words)
        groups = pack(units, sizes, anchors=anchors(units, found), whole=False)
        chunks = _Assembly(text, blocks, units, found, doc_id, source).chunks(groups)
        if chunks:
            for chunk, value in zip(chunks, _densities(text, chunks, words), strict=True):
                chunk.metadata["keyword_density"] = value
        return cap_chunks(text, chunks, self.characters, sizes.cap, _own_density)


# -- the compiled core ----------------------------------------------------------------------------


def _configure(core: ModuleType) -> None:
    """Hands the compiled core this module's tables (see :mod:`worker.chunking._native`)."""
    if tuple(lexicon.LADDER_PHRASES) != LADDER[:5]:
        raise RuntimeError("lexicon.LADDER_PHRASES must list the prefix rules in LADDER order")
    core.configure(
        chunk_type=Chunk,
        strategy=NAME,
        reasons=REASONS,
        openings=(lexicon.TRANSITION_PHRASES, *lexicon.LADDER_PHRASES.values()),
        kinds=tuple(KIND_NAMES[kind] for kind in sorted(KIND_NAMES)),
        alone_types={KIND_NAMES[kind]: name for kind, name in _ALONE_TYPES.items()},
        heading_type=_HEADING_TYPE,
        prose_type=_PROSE_TYPE,
        stop_words=sorted(lexicon.STOP_WORDS),
        abbreviations=sorted(ABBREVIATIONS),
        short_paragraph_chars=lexicon.SHORT_PARAGRAPH_CHARS,
        keyword_min_letters=lexicon.KEYWORD_MIN_LETTERS,
        keyword_overlap_min=lexicon.KEYWORD_OVERLAP_MIN,
        list_keyword_overlap_min=lexicon.LIST_KEYWORD_OVERLAP_MIN,
        lead_window=LEAD_WINDOW,
    )


# text, doc_id, source, cap, the cores' memory of piece counts and the PieceCounter's
# count_pieces (None, None: characters) and word_cuts.cut_word for a word over the cap ->
# chunks, or None when the document needs the twin.
CompiledChunk = Callable[
    [
        str,
        str,
        str,
        int,
        object | None,
        Callable[[list[str]], list[int]] | None,
        WordCutter | None,
    ],
    list[Chunk] | None,
]


def compiled() -> CompiledChunk | None:
    """The compiled core's entry point, configured, or None when it is not built or the
    switch is off (:mod:`worker.chunking._native`)."""
    core = native.core("_lexical_core", _configure)
    return None if core is None else cast(CompiledChunk, core.chunk)
