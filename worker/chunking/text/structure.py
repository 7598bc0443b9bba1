"""A document as *units* that chunks are built from, with the strength of each gap between them.

The rule strategies cut only between units, so what a unit is decides what stays whole:

* a paragraph (lines up to a blank line, a line that opens another block, or a line indented
  deeper than the one before it; so an indented first line *starts* a paragraph, and the
  flush-left lines after it continue it) gives one unit per sentence; inside it every line
  break is a soft wrap;
* a fenced code block, an indented code block, a table, a list item with its continuation
  lines (indented lines, lazy lines, nested items and fences, blank lines followed by indented
  lines), a block quote, an HTML block, a heading and a rule line are one unit each.

Every unit but the first has a *level*: how good a place the gap before it is for a cut,
strongest first: ``SECTION`` (before a heading or a rule line), ``BLOCK`` (between blocks),
``ITEM`` (between two list items), ``SENTENCE`` (inside a paragraph), then ``GLUE`` (after a
heading or a rule line, after a block whose text ends with ``:``: what it introduces follows),
``LINE``, ``CLAUSE`` (after an Arabic comma, for the strategies that cut there), ``WORD`` and
``CHAR`` (inside a unit too large to keep whole: see :func:`.units.read_units`).

The reading is line-based: lines end at ``\\n`` (a ``\\r`` before it is whitespace); a fence
line is any line whose first characters after spaces and tabs are three backticks or tildes
(openers and closers alternate, as in :func:`.segment.fence_lines`); unclosed fences run to the
end. The compiled core states this module again in C (``_native/_structure.h``); tests compare.
"""

from __future__ import annotations

from typing import Final

SECTION: Final = 8
BLOCK: Final = 7
ITEM: Final = 6
SENTENCE: Final = 5
GLUE: Final = 4
LINE: Final = 3
CLAUSE: Final = 2
WORD: Final = 1
CHAR: Final = 0

# Block kinds.
PARAGRAPH: Final = 0
HEADING: Final = 1
RULE: Final = 2
CODE: Final = 3
TABLE: Final = 4
ITEM_BLOCK: Final = 5
QUOTE: Final = 6
HTML: Final = 7

_RULE_CHARS: Final = "=-~^*+#_"
"""A line of three or more of one of these (spaces between allowed) is a rule line: a
thematic break, a setext or reStructuredText underline or overline."""


class Lines:
    """The document's lines: where each starts and ends (its ``\\n`` excluded)."""

    def __init__(self, text: str) -> None:
        self.text = text
        starts = [0]
        ends = []
        at = text.find("\n")
        while at >= 0:
            ends.append(at)
            starts.append(at + 1)
            at = text.find("\n", at + 1)
        ends.append(len(text))
        self.starts = starts
        self.ends = ends
        self.count = len(starts)

    def head(self, i: int) -> int:
        """The first position of line ``i`` after spaces and tabs."""
        text, p, end = self.text, self.starts[i], self.ends[i]
        while p < end and text[p] in " \t":
            p += 1
        return p

    def blank(self, i: int) -> bool:
        start, end = self.starts[i], self.ends[i]
        return start == end or self.text[start:end].isspace()

    def indent(self, i: int) -> int:
        return self.head(i) - self.starts[i]


def _is_fence(lines: Lines, i: int) -> bool:
    text, p = lines.text, lines.head(i)
    return text.startswith("```", p) or text.startswith("~~~", p)


def _is_rule(lines: Lines, i: int) -> bool:
    """Three or more of one rule character and nothing else but spaces, tabs and a ``\\r``."""
    text, p, end = lines.text, lines.head(i), lines.ends[i]
    if lines.indent(i) > 3 or p >= end or text[p] not in _RULE_CHARS:
        return False
    mark, count = text[p], 0
    for c in text[p:end]:
        if c == mark:
            count += 1
        elif c not in " \t\r":
            return False
    return count >= 3


def _is_heading(lines: Lines, i: int) -> bool:
    """An ATX heading: up to three spaces, one to six ``#``, then a space, a tab or the end."""
    text, p, end = lines.text, lines.head(i), lines.ends[i]
    if lines.indent(i) > 3:
        return False
    marks = 0
    while p + marks < end and text[p + marks] == "#":
        marks += 1
    after = p + marks
    return 1 <= marks <= 6 and (after == end or text[after] in " \t\r")


def _is_item(lines: Lines, i: int) -> bool:
    """A list item's first line: ``- * +`` or 1–9 digits and ``.`` / ``)``, then a space, a
    tab or the end, indented at most three columns."""
    text, p, end = lines.text, lines.head(i), lines.ends[i]
    if lines.indent(i) > 3 or p >= end:
        return False
    if text[p] in "-*+":
        after = p + 1
    else:
        digits = p
        while digits < end and digits - p < 10 and "0" <= text[digits] <= "9":
            digits += 1
        if not 1 <= digits - p <= 9 or digits >= end or text[digits] not in ".)":
            return False
        after = digits + 1
    return after == end or text[after] in " \t\r"


def _is_table_row(lines: Lines, i: int) -> bool:
    return lines.text.startswith("|", lines.head(i))


def _is_delimiter_row(lines: Lines, i: int) -> bool:
    """A table's delimiter row: only ``| : -`` and spaces, with a ``|`` and a ``-``."""
    text, start, end = lines.text, lines.starts[i], lines.ends[i]
    piece = text[start:end]
    return "|" in piece and "-" in piece and all(c in "|:- \t\r" for c in piece)


def _is_table_start(lines: Lines, i: int) -> bool:
    if _is_table_row(lines, i):
        return True
    body = lines.text[lines.starts[i] : lines.ends[i]]
    return "|" in body and i + 1 < lines.count and _is_delimiter_row(lines, i + 1)


def _is_quote(lines: Lines, i: int) -> bool:
    return lines.indent(i) <= 3 and lines.text.startswith(">", lines.head(i))


def _is_html(lines: Lines, i: int) -> bool:
    text, p, end = lines.text, lines.head(i), lines.ends[i]
    if lines.indent(i) > 3 or p + 1 >= end or text[p] != "<":
        return False
    c = text[p + 1]
    return c in "/!?" or (c.isascii() and c.isalpha())


def _opens_block(lines: Lines, i: int) -> bool:
    """Whether non-blank line ``i`` opens a block that ends a paragraph before it."""
    return (
        _is_fence(lines, i)
        or _is_heading(lines, i)
        or _is_rule(lines, i)
        or _is_item(lines, i)
        or _is_quote(lines, i)
        or _is_html(lines, i)
        or _is_table_start(lines, i)
    )


def _fence_end(lines: Lines, i: int) -> int:
    """The line after the fence that closes the one on line ``i`` (or the end)."""
    j = i + 1
    while j < lines.count and not _is_fence(lines, j):
        j += 1
    return min(j + 1, lines.count)


def _next_filled(lines: Lines, j: int) -> int:
    while j < lines.count and lines.blank(j):
        j += 1
    return j


def _item_end(lines: Lines, i: int) -> int:
    """The line after the list item that starts on line ``i``."""
    own = lines.indent(i)
    j = i + 1
    while j < lines.count:
        if lines.blank(j):
            k = _next_filled(lines, j)
            if k < lines.count and lines.indent(k) > own:
                j = k
                continue
            return j
        if lines.indent(j) > own:
            j = _fence_end(lines, j) if _is_fence(lines, j) else j + 1
            continue
        if _opens_block(lines, j):
            return j
        j += 1  # a lazy continuation line
    return j


def _block_end(lines: Lines, i: int) -> tuple[int, int]:
    """The kind of the block starting on non-blank line ``i`` and the line after it."""
    if _is_fence(lines, i):
        return CODE, _fence_end(lines, i)
    if lines.indent(i) >= 4:
        j, end = i + 1, i + 1
        while j < lines.count and (lines.blank(j) or lines.indent(j) >= 4):
            j += 1
            if not lines.blank(j - 1):
                end = j
        return CODE, end
    if _is_heading(lines, i):
        return HEADING, i + 1
    if _is_rule(lines, i):
        return RULE, i + 1
    if _is_table_start(lines, i):
        j = i + 1
        while (
            j < lines.count
            and not lines.blank(j)
            and "|" in lines.text[lines.starts[j] : lines.ends[j]]
        ):
            j += 1
        return TABLE, j
    if _is_item(lines, i):
        return ITEM_BLOCK, _item_end(lines, i)
    if _is_quote(lines, i) or _is_html(lines, i):
        kind = QUOTE if _is_quote(lines, i) else HTML
        j = i + 1
        while j < lines.count and not lines.blank(j):
            j += 1
        return kind, j
    j = i + 1
    while j < lines.count and not lines.blank(j):
        if _is_rule(lines, j):
            return HEADING, j + 1  # a setext (or reStructuredText) underline
        # A line indented deeper than the one before starts a block of its own (code, a new
        # paragraph); an indented first line followed by flush-left lines is one paragraph.
        if _opens_block(lines, j) or lines.indent(j) > lines.indent(j - 1):
            break
        j += 1
    return PARAGRAPH, j


def read_blocks(text: str) -> list[tuple[int, int, int]]:
    """The blocks of ``text`` as ``(kind, start, end)``, each stripped of whitespace."""
    lines = Lines(text)
    blocks: list[tuple[int, int, int]] = []
    i = 0
    while i < lines.count:
        if lines.blank(i):
            i += 1
            continue
        kind, after = _block_end(lines, i)
        start, end = lines.starts[i], lines.ends[after - 1]
        while text[start].isspace():
            start += 1
        while text[end - 1].isspace():
            end -= 1
        blocks.append((kind, start, end))
        i = after
    return blocks


def gap_level(previous: tuple[int, int, int], following: tuple[int, int, int], text: str) -> int:
    """The level of the gap between two consecutive blocks."""
    if previous[0] in (HEADING, RULE) or text[previous[2] - 1] == ":":
        return GLUE
    if following[0] in (HEADING, RULE):
        return SECTION
    if previous[0] == ITEM_BLOCK and following[0] == ITEM_BLOCK:
        return ITEM
    return BLOCK
