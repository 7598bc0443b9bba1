"""A document's layout for the embedding strategies: atoms to embed, grains to cut between, and
how good a place for a cut each gap is.

*Atoms* are what gets embedded (each once) and what stays whole while it fits the cap: a
sentence of a paragraph (sentences shorter than ``min_characters`` join the next one of the same
paragraph, the last one joins the one before), and as a whole each heading, fenced or indented
code block, table, list item (its continuation lines and nested items included), block quote,
HTML block, front matter and thematic break. Blocks come from
:func:`worker.chunking.text.markdown.split_blocks`, for plain text too: blank lines, fences and
indentation mean the same there, and a plain-text document without them is paragraphs.

Every gap between two atoms has a *level*, the strongest first:

========  ==================================================================================
SECTION   before a heading, after a thematic break
BLOCK     between two blocks (a blank line, or a block that interrupts another)
ITEM      between two items of one list
SENTENCE  between two sentences of one paragraph
GLUE      after a heading or a text ending in ``:``, before a thematic break or a closing HTML
          tag, after an opening one: what opens something stays with it
========  ==================================================================================

*Grains* are what chunks are made of. An atom larger than ``grain_limit`` is cut into grains —
its lines when it has several (code, tables, items, quotes, HTML), then runs of words, then
characters — and the gaps inside it get the levels ``LINE``, ``WORD`` and ``CHAR``; every other
atom is one grain. Grains inside an atom are cut only when no gap between atoms can be
(:mod:`.cuts`), and the limit keeps any grain small enough that a chunking which respects the
minimum size always exists.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import NDArray

from worker.chunking.text.markdown import split_blocks
from worker.chunking.text.segment import split_sentences, split_to_cap
from worker.chunking.text.tokens import TokenCounter
from worker.chunking.types import Span

SECTION: Final = 7
BLOCK: Final = 6
ITEM: Final = 5
SENTENCE: Final = 4
GLUE: Final = 3
LINE: Final = 2
WORD: Final = 1
CHAR: Final = 0
LEVEL_NAMES: Final = ("char", "word", "line", "glue", "sentence", "item", "block", "section")

# Atom kinds.
PROSE: Final = 0
HEADING: Final = 1
CODE: Final = 2
TABLE: Final = 3
LIST_ITEM: Final = 4
QUOTE: Final = 5
HTML: Final = 6
RULE: Final = 7
FRONT_MATTER: Final = 8
_KIND_OF_BLOCK = {
    "paragraph": PROSE,
    "heading": HEADING,
    "code": CODE,
    "table": TABLE,
    "list": LIST_ITEM,
    "blockquote": QUOTE,
    "html": HTML,
    "thematic_break": RULE,
    "front_matter": FRONT_MATTER,
}
# Kinds whose lines are grains when the atom is too large to keep whole.
_LINED = frozenset({CODE, TABLE, LIST_ITEM, QUOTE, HTML, FRONT_MATTER})
_BULLET = re.compile(r"[ \t]*(?:[-+*]|\d{1,9}[.)])(?:[ \t]|$)")
_COLONS = (":", "：")

Sizer = Callable[[Sequence[str]], NDArray[np.int64]]


@dataclass(frozen=True, eq=False)
class Layout:
    """Atoms and grains of one document, as parallel arrays (document order)."""

    starts: NDArray[np.int64]
    """Atoms: ``text[starts[k]:ends[k]]``, stripped, disjoint, covering every non-space."""
    ends: NDArray[np.int64]
    kinds: NDArray[np.int8]
    levels: NDArray[np.int8]
    """Level of the gap before each atom (``levels[0]`` is unused: the document's start)."""
    sizes: NDArray[np.int64]
    """Each atom's size in the strategy's unit."""
    grain_starts: NDArray[np.int64]
    grain_ends: NDArray[np.int64]
    grain_atoms: NDArray[np.int64]
    """The atom each grain belongs to."""
    grain_levels: NDArray[np.int8]
    """Level of the gap before each grain: its atom's level for an atom's first grain."""
    grain_sizes: NDArray[np.int64]

    @property
    def atom_count(self) -> int:
        return len(self.starts)

    def atom_spans(self) -> tuple[Span, ...]:
        return tuple(Span(int(a), int(b)) for a, b in zip(self.starts, self.ends, strict=True))


def _strip(text: str, start: int, end: int) -> tuple[int, int] | None:
    piece = text[start:end]
    left = piece.lstrip()
    if not left:
        return None
    begin = start + len(piece) - len(left)
    return begin, begin + len(left.rstrip())


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def list_items(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The items of the list block ``text[start:end]``: a line opening with a bullet (or an
    ordered marker) at most as indented as the list's first line starts an item; every other
    line — indented continuation, lazy continuation, nested items, blank lines, fences —
    belongs to the item above it."""
    base = _indent(text[start : text.find("\n", start, end) if "\n" in text[start:end] else end])
    items: list[tuple[int, int]] = []
    item_start = start
    at = start
    while at < end:
        line_end = text.find("\n", at, end)
        line_end = end if line_end < 0 else line_end
        line = text[at:line_end]
        if at > start and line.strip() and _indent(line) <= base and _BULLET.match(line):
            span = _strip(text, item_start, at)
            if span is not None:
                items.append(span)
            item_start = at
        at = line_end + 1
    span = _strip(text, item_start, end)
    if span is not None:
        items.append(span)
    return items


def _lines(text: str, start: int, end: int) -> list[tuple[int, int]]:
    lines: list[tuple[int, int]] = []
    at = start
    while at < end:
        line_end = text.find("\n", at, end)
        line_end = end if line_end < 0 else line_end
        span = _strip(text, at, line_end)
        if span is not None:
            lines.append(span)
        at = line_end + 1
    return lines


class _Atoms:
    """Atoms as they are read, with the level of the gap before each."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.kinds: list[int] = []
        self.levels: list[int] = []

    def add(self, start: int, end: int, kind: int, level: int) -> None:
        if self.kinds:
            previous = self.kinds[-1]
            before = self.text[self.ends[-1] - 1]
            if previous == HEADING:
                level = GLUE
            elif kind == HEADING:
                level = SECTION
            elif kind == RULE or (kind == HTML and self.text.startswith("</", start)):
                level = GLUE
            elif previous == RULE:
                level = SECTION
            elif before in _COLONS or (
                previous == HTML and _opens_only(self.text[self.starts[-1] : self.ends[-1]])
            ):
                level = GLUE
        self.starts.append(start)
        self.ends.append(end)
        self.kinds.append(kind)
        self.levels.append(level)


_OPENING_TAG = re.compile(r"<([A-Za-z][A-Za-z0-9-]*)")


def _opens_only(block: str) -> bool:
    """Whether an HTML block opens a tag it does not close (``<details><summary>…</summary>``):
    what follows is inside it."""
    tag = _OPENING_TAG.match(block)
    return tag is not None and f"</{tag.group(1).lower()}" not in block.lower()


def _paragraph(atoms: _Atoms, start: int, end: int, min_characters: int) -> None:
    text = atoms.text
    sentences = [
        (s.start + start, s.end + start) for s in split_sentences(text[start:end], soft_wraps=True)
    ]
    joined: list[tuple[int, int]] = []
    pending: int | None = None
    for a, b in sentences:
        if pending is not None:
            a, pending = pending, None
        if b - a < min_characters:
            pending = a
            continue
        joined.append((a, b))
    if pending is not None:
        if joined:
            joined[-1] = (joined[-1][0], sentences[-1][1])
        else:
            joined.append((pending, sentences[-1][1]))
    for n, (a, b) in enumerate(joined):
        atoms.add(a, b, PROSE, BLOCK if n == 0 else SENTENCE)


def read_atoms(text: str, min_characters: int = 0) -> _Atoms:
    atoms = _Atoms(text)
    for block in split_blocks(text):
        kind = _KIND_OF_BLOCK[block.kind]
        if kind == PROSE:
            _paragraph(atoms, block.start, block.end, min_characters)
        elif kind == LIST_ITEM:
            for n, (a, b) in enumerate(list_items(text, block.start, block.end)):
                atoms.add(a, b, LIST_ITEM, BLOCK if n == 0 else ITEM)
        else:
            atoms.add(block.start, block.end, kind, BLOCK)
    return atoms


def read_layout(
    text: str,
    counter: TokenCounter,
    sizer: Sizer,
    grain_limit: int,
    min_characters: int = 0,
    *,
    clauses: bool = False,
) -> Layout:
    """The layout of ``text``: atoms measured with ``sizer`` (many texts at once, in
    ``counter``'s unit), grains no larger than ``grain_limit`` (≥ 1). With ``clauses`` a
    sentence too large to keep whole is cut at Arabic commas before words."""
    atoms = read_atoms(text, min_characters)
    count = len(atoms.starts)
    sizes = sizer([text[a:b] for a, b in zip(atoms.starts, atoms.ends, strict=True)])
    grain_starts: list[int] = []
    grain_ends: list[int] = []
    grain_atoms: list[int] = []
    grain_levels: list[int] = []
    grain_sizes: list[int] = []
    for k in range(count):
        start, end, level = atoms.starts[k], atoms.ends[k], atoms.levels[k]
        if sizes[k] <= grain_limit:
            grain_starts.append(start)
            grain_ends.append(end)
            grain_atoms.append(k)
            grain_levels.append(level)
            grain_sizes.append(int(sizes[k]))
            continue
        if atoms.kinds[k] in _LINED:
            lines = _lines(text, start, end)
        elif clauses:
            lines = [
                (s.start + start, s.end + start)
                for s in split_sentences(text[start:end], clauses=True)
            ]
        else:
            lines = [(start, end)]
        pieces: list[tuple[int, int, int]] = []  # start, end, level before
        for n, (a, b) in enumerate(lines):
            for m, span in enumerate(split_to_cap(text, Span(a, b), counter, grain_limit)):
                # Pieces of one line: at words, or inside a word when nothing else fits.
                inner = (CHAR if pieces[-1][1] == span.start else WORD) if m else LINE
                pieces.append((span.start, span.end, level if n == m == 0 else inner))
        piece_sizes = sizer([text[a:b] for a, b, _ in pieces])
        for (a, b, piece_level), piece_size in zip(pieces, piece_sizes, strict=True):
            grain_starts.append(a)
            grain_ends.append(b)
            grain_atoms.append(k)
            grain_levels.append(piece_level)
            grain_sizes.append(int(piece_size))
    return Layout(
        starts=np.asarray(atoms.starts, dtype=np.int64),
        ends=np.asarray(atoms.ends, dtype=np.int64),
        kinds=np.asarray(atoms.kinds, dtype=np.int8),
        levels=np.asarray(atoms.levels, dtype=np.int8),
        sizes=np.asarray(sizes, dtype=np.int64),
        grain_starts=np.asarray(grain_starts, dtype=np.int64),
        grain_ends=np.asarray(grain_ends, dtype=np.int64),
        grain_atoms=np.asarray(grain_atoms, dtype=np.int64),
        grain_levels=np.asarray(grain_levels, dtype=np.int8),
        grain_sizes=np.asarray(grain_sizes, dtype=np.int64),
    )
