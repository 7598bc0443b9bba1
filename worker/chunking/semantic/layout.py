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
its lines when it has several (code, tables, items, quotes, HTML), the sentences it joined (or
with ``clauses`` its Arabic clauses), then runs of words, then characters — and the gaps inside
it get the levels ``LINE``, ``WORD`` and ``CHAR``; every other atom is one grain. Grains inside
an atom are cut only when no gap between atoms can be (:mod:`.cuts`), and the limit keeps any
grain small enough that a chunking which respects the minimum size always exists.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final, overload

import numpy as np
from numpy.typing import NDArray

from worker.chunking import _native as native
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
    """Atoms as they are read, with the level of the gap before each (machine integers: a
    large document has hundreds of thousands)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = array("q")
        self.ends = array("q")
        self.kinds = array("b")
        self.levels = array("b")

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


def _sentences(text: str, start: int, end: int, clauses: bool = False) -> list[tuple[int, int]]:
    """The sentences of ``text[start:end]`` (soft wraps read as spaces), offsets in ``text``:
    in C when the sentence core is built and the switch is on (:mod:`worker.chunking._native`;
    the same sentences: tests/chunking/semantic/test_layout_sentences.py)."""
    compiled = native.layout_sentences()
    if compiled is not None:
        flat = compiled(text, start, end, clauses)
        return list(zip(flat[::2], flat[1::2], strict=True))
    return [
        (s.start + start, s.end + start)
        for s in split_sentences(text[start:end], clauses=clauses, soft_wraps=True)
    ]


def _paragraph(atoms: _Atoms, start: int, end: int, min_characters: int) -> None:
    sentences = _sentences(atoms.text, start, end)
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


class _Slices(Sequence[str]):
    """``text[starts[k]:ends[k]]`` for every ``k``, made when asked for (a batch at a time)."""

    def __init__(self, text: str, starts: NDArray[np.int64], ends: NDArray[np.int64]) -> None:
        self.text, self.starts, self.ends = text, starts, ends

    def __len__(self) -> int:
        return len(self.starts)

    def __iter__(self) -> Iterator[str]:
        return iter(self[:])  # one batch: not a numpy lookup per text

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            pairs = zip(self.starts[index].tolist(), self.ends[index].tolist(), strict=True)
            return [self.text[a:b] for a, b in pairs]
        return self.text[int(self.starts[index]) : int(self.ends[index])]


def _pieces(
    text: str,
    start: int,
    end: int,
    kind: int,
    level: int,
    limit: int,
    counter: TokenCounter,
    clauses: bool,
) -> list[tuple[int, int, int]]:
    """The grains of an atom over ``limit``: (start, end, level of the gap before)."""
    # Lined atoms by their lines; a sentence, or short ones joined, by its sentences (and with
    # clauses, Arabic commas).
    lines = _lines(text, start, end) if kind in _LINED else _sentences(text, start, end, clauses)
    pieces: list[tuple[int, int, int]] = []
    for n, (a, b) in enumerate(lines):
        for m, span in enumerate(split_to_cap(text, Span(a, b), counter, limit)):
            # Pieces of one line: at words, or inside a word when nothing else fits.
            inner = (CHAR if pieces[-1][1] == span.start else WORD) if m else LINE
            pieces.append((span.start, span.end, level if n == m == 0 else inner))
    return pieces


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
    read = read_atoms(text, min_characters)
    starts = np.frombuffer(read.starts, dtype=np.int64).copy()
    ends = np.frombuffer(read.ends, dtype=np.int64).copy()
    kinds = np.frombuffer(read.kinds, dtype=np.int8).copy()
    levels = np.frombuffer(read.levels, dtype=np.int8).copy()
    del read
    sizes = np.asarray(sizer(_Slices(text, starts, ends)), dtype=np.int64)
    atoms = np.arange(len(starts), dtype=np.int64)
    big = np.flatnonzero(sizes > grain_limit)
    if not len(big):  # every atom is one grain
        return Layout(starts, ends, kinds, levels, sizes, starts, ends, atoms, levels, sizes)
    parts: list[tuple[NDArray[np.int64], ...]] = []
    previous = 0
    for k in big.tolist():
        keep = slice(previous, k)
        parts.append(
            (starts[keep], ends[keep], atoms[keep], levels[keep].astype(np.int64), sizes[keep])
        )
        pieces = _pieces(
            text,
            int(starts[k]),
            int(ends[k]),
            int(kinds[k]),
            int(levels[k]),
            grain_limit,
            counter,
            clauses,
        )
        piece = np.asarray(pieces, dtype=np.int64).reshape(-1, 3)
        piece_sizes = np.asarray(sizer([text[a:b] for a, b, _ in pieces]), dtype=np.int64)
        parts.append((piece[:, 0], piece[:, 1], np.full(len(piece), k), piece[:, 2], piece_sizes))
        previous = k + 1
    tail = slice(previous, len(starts))
    parts.append(
        (starts[tail], ends[tail], atoms[tail], levels[tail].astype(np.int64), sizes[tail])
    )
    columns = [np.concatenate([part[i] for part in parts]) for i in range(5)]
    return Layout(
        starts=starts,
        ends=ends,
        kinds=kinds,
        levels=levels,
        sizes=sizes,
        grain_starts=columns[0],
        grain_ends=columns[1],
        grain_atoms=columns[2],
        grain_levels=columns[3].astype(np.int8),
        grain_sizes=columns[4],
    )
