"""Markdown block segmentation with exact character offsets.

A pragmatic line-based reading of CommonMark + GFM that finds block boundaries, not inline
structure: ATX and setext headings, paragraphs, bullet and ordered lists (nested items stay
in their list), fenced and indented code, GFM tables, block quotes, thematic breaks, YAML/TOML
front matter and HTML blocks. Each block's span has no surrounding whitespace; blocks are in
order, disjoint, and cover every non-whitespace character of the document.
"""

from __future__ import annotations

import re
from itertools import accumulate, repeat
from operator import not_
from typing import Final, Literal

import msgspec

BlockKind = Literal[
    "heading",
    "paragraph",
    "list",
    "code",
    "table",
    "blockquote",
    "thematic_break",
    "front_matter",
    "html",
]

HEADING: Final = "heading"
PARAGRAPH: Final = "paragraph"
LIST: Final = "list"
CODE: Final = "code"
TABLE: Final = "table"
BLOCKQUOTE: Final = "blockquote"
THEMATIC_BREAK: Final = "thematic_break"
FRONT_MATTER: Final = "front_matter"
HTML: Final = "html"


class Block(msgspec.Struct, frozen=True):
    kind: BlockKind
    start: int
    end: int
    level: int = 0
    """Heading level 1–6; 0 for every other kind."""


_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]|$)")
_FENCE = re.compile(r"[ \t]*(`{3,}|~{3,})")
_THEMATIC = re.compile(r" {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_SETEXT = re.compile(r" {0,3}(=+|-+)[ \t]*$")
_BULLET = re.compile(r"[ \t]*(?:[-+*]|(\d{1,9})[.)])(?:[ \t]|$)")
_TABLE_DELIMITER = re.compile(r" {0,3}\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")
_HTML_START = re.compile(
    r" {0,3}<(?:!--|[A-Za-z][A-Za-z0-9-]*[\s/>]|[A-Za-z][A-Za-z0-9-]*$|/[A-Za-z]|![A-Z]|\?)"
)
_HTML_RAW = re.compile(r" {0,3}<(script|pre|style|textarea)[\s>]", re.IGNORECASE)
_FRONT_MATTER_OPEN = ("---", "+++")
_LINE_END = "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # what splitlines() cuts at

# First characters after indentation that may open a block other than a paragraph. A line
# starting with anything else (a letter, most punctuation) is plain paragraph text, which
# lets the hot loop skip every pattern for ordinary prose lines.
_MARKERS = frozenset("#`~>-*+_<=|0123456789")


def _indent(line: str) -> int:
    """Leading indentation in columns (a tab advances to the next multiple of four)."""
    width = 0
    for ch in line:
        if ch == " ":
            width += 1
        elif ch == "\t":
            width += 4 - width % 4
        else:
            break
    return width


class _Lines:
    """The document as lines (line breaks kept) with the offset where each starts."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.raw = text.splitlines(keepends=True)
        # Built with C-level maps: no Python step per line.
        self.body = list(map(str.rstrip, self.raw, repeat(_LINE_END, len(self.raw))))
        self.starts = [0, *accumulate(map(len, self.raw))]
        self.blank = list(map(not_, map(str.strip, self.body)))
        self.count = len(self.raw)


def _is_table_start(lines: _Lines, i: int) -> bool:
    return (
        "|" in lines.body[i]
        and i + 1 < lines.count
        and "-" in lines.body[i + 1]
        and _TABLE_DELIMITER.match(lines.body[i + 1]) is not None
    )


def _fence_end(lines: _Lines, i: int, fence: str) -> int:
    """Index after the closing fence of the code block opened on line ``i`` (or the end)."""
    char, size = fence[0], len(fence)
    closing = re.compile(rf"[ \t]*{re.escape(char)}{{{size},}}[ \t]*$")
    for j in range(i + 1, lines.count):
        if closing.match(lines.body[j]):
            return j + 1
    return lines.count


def _front_matter_end(lines: _Lines) -> int:
    """Line index after the front matter block, or 0 when the document has none."""
    opener = lines.body[0].rstrip() if lines.count else ""
    if opener not in _FRONT_MATTER_OPEN:
        return 0
    closers = ("---", "...") if opener == "---" else ("+++",)
    for j in range(1, min(lines.count, 500)):
        if lines.body[j].rstrip() in closers:
            return j + 1 if j > 1 else 0
    return 0


def _interrupts_paragraph(lines: _Lines, i: int) -> bool:
    """Whether line ``i`` starts a block that can cut a paragraph short."""
    line = lines.body[i]
    head = line.lstrip(" \t")
    if not head or head[0] not in _MARKERS or _indent(line) >= 4:
        return False
    first = head[0]
    if first == "#":
        return _ATX.match(line) is not None
    if first in "`~":
        return _FENCE.match(line) is not None
    if first == ">":
        return True
    if first == "<":
        return _HTML_START.match(line) is not None
    if _is_table_start(lines, i):
        return True
    if _THEMATIC.match(line):
        return True
    bullet = _BULLET.match(line)
    if bullet is None or not head[1:].strip():
        return False
    # An ordered list interrupts a paragraph only when it starts at 1 (CommonMark).
    number = bullet.group(1)
    return number is None or number == "1"


def _continues_list(lines: _Lines, i: int) -> bool:
    """Whether non-blank line ``i`` still belongs to the list being read (lazy continuation)."""
    line = lines.body[i]
    if _BULLET.match(line) or _indent(line) >= 2:
        return True
    return not _interrupts_paragraph(lines, i)


def _list_end(lines: _Lines, i: int) -> int:
    j = i + 1
    while j < lines.count:
        if not lines.blank[j]:
            if not _continues_list(lines, j):
                return j
            j += 1
            continue
        # A blank line ends the list unless an item or indented content follows it.
        k = j
        while k < lines.count and lines.blank[k]:
            k += 1
        if k == lines.count:
            return k
        following = lines.body[k]
        if _BULLET.match(following) or _indent(following) >= 2:
            j = k + 1
            continue
        return j
    return j


def _until_blank(lines: _Lines, i: int) -> int:
    j = i + 1
    while j < lines.count and not lines.blank[j]:
        j += 1
    return j


def _html_end(lines: _Lines, i: int) -> int:
    line = lines.body[i]
    raw = _HTML_RAW.match(line)
    if raw is not None:
        closing = f"</{raw.group(1).lower()}>"
        for j in range(i, lines.count):
            if closing in lines.body[j].lower():
                return j + 1
        return lines.count
    if line.lstrip().startswith("<!--"):
        for j in range(i, lines.count):
            if "-->" in lines.body[j]:
                return j + 1
        return lines.count
    return _until_blank(lines, i)


def _paragraph_end(lines: _Lines, i: int) -> tuple[int, int]:
    """Index after the paragraph starting at line ``i``, and its setext level (0 if none)."""
    j = i + 1
    while j < lines.count:
        if lines.blank[j]:
            return j, 0
        line = lines.body[j]
        head = line.lstrip(" \t")
        if head[0] in "=-" and _SETEXT.match(line):
            return j + 1, 1 if head[0] == "=" else 2
        if head[0] in _MARKERS and _interrupts_paragraph(lines, j):
            return j, 0
        j += 1
    return j, 0


def _block(lines: _Lines, kind: BlockKind, first: int, after: int, level: int = 0) -> Block:
    """The block over lines ``[first, after)`` with surrounding whitespace trimmed."""
    start, end = lines.starts[first], lines.starts[after]
    piece = lines.text[start:end]
    body = piece.lstrip()
    inner = start + len(piece) - len(body)
    return Block(kind, inner, inner + len(body.rstrip()), level)


def split_blocks(text: str) -> list[Block]:
    """The markdown blocks of ``text`` in document order."""
    lines = _Lines(text)
    blocks: list[Block] = []
    i = _front_matter_end(lines)
    if i:
        blocks.append(_block(lines, FRONT_MATTER, 0, i))
    while i < lines.count:
        if lines.blank[i]:
            i += 1
            continue
        line = lines.body[i]
        head = line.lstrip(" \t")
        indent = _indent(line)
        kind: BlockKind = PARAGRAPH
        level = 0
        if head[0] not in _MARKERS:
            if indent >= 4:
                kind, after = CODE, _indented_code_end(lines, i)
            else:
                after, level = _paragraph_end(lines, i)
                kind = HEADING if level else PARAGRAPH
            blocks.append(_block(lines, kind, i, after, level))
            i = after
            continue
        fence = _FENCE.match(line)
        if fence is not None and (fence.group(1)[0] == "~" or "`" not in line[fence.end() :]):
            kind, after = CODE, _fence_end(lines, i, fence.group(1))
        elif indent >= 4:
            kind, after = CODE, _indented_code_end(lines, i)
        elif (atx := _ATX.match(line)) is not None:
            kind, after, level = HEADING, i + 1, len(atx.group(1))
        elif _THEMATIC.match(line):
            kind, after = THEMATIC_BREAK, i + 1
        elif head[0] == ">":
            kind, after = BLOCKQUOTE, _until_blank(lines, i)
        elif head[0] == "<" and _HTML_START.match(line):
            kind, after = HTML, _html_end(lines, i)
        elif _is_table_start(lines, i):
            kind, after = TABLE, _table_end(lines, i)
        elif _BULLET.match(line):
            kind, after = LIST, _list_end(lines, i)
        else:
            after, level = _paragraph_end(lines, i)
            kind = HEADING if level else PARAGRAPH
        blocks.append(_block(lines, kind, i, after, level))
        i = after
    return blocks


def _indented_code_end(lines: _Lines, i: int) -> int:
    j = i + 1
    end = j
    while j < lines.count:
        if lines.blank[j]:
            j += 1
            continue
        if _indent(lines.body[j]) < 4:
            break
        j += 1
        end = j
    return end


def _table_end(lines: _Lines, i: int) -> int:
    j = i + 2
    while j < lines.count and not lines.blank[j] and "|" in lines.body[j]:
        j += 1
    return j
