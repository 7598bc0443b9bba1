"""Independent readings of a document's structure, for checking the structure rules.

Written apart from the strategies' own reader (worker/chunking/text/structure.py) and its C
twin: fences are paired as ``segment.fence_lines`` pairs them, except that a line of tildes or
backticks right under a line of text is a reStructuredText title underline, not a fence; and a
heading is what ``markdown.split_blocks`` (lexical's reader) calls one, outside fenced code.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from worker.chunking.text.markdown import split_blocks
from worker.chunking.types import Chunk

_FENCE = re.compile(r"[ \t]*(?:```|~~~)")
_UNDERLINE = re.compile(r"[ \t]*(?:~{3,}|`{3,})[ \t\r]*$")


def fenced_blocks(text: str) -> list[tuple[int, int]]:
    """Fenced code blocks as (start, end), from the opening fence to the end of the closing
    fence line (or of the text), whitespace stripped."""
    lines = text.split("\n")
    starts: list[int] = []
    at = 0
    previous = ""
    for line in lines:
        underline = _UNDERLINE.match(line) and previous.strip() and not _FENCE.match(previous)
        if _FENCE.match(line) and not (underline and len(starts) % 2 == 0):
            starts.append(at)
        previous = line
        at += len(line) + 1
    blocks = []
    for k in range(0, len(starts), 2):
        start = starts[k]
        if k + 1 < len(starts):
            end = text.find("\n", starts[k + 1])
            end = len(text) if end < 0 else end
        else:
            end = len(text)
        piece = text[start:end]
        blocks.append((start + len(piece) - len(piece.lstrip()), start + len(piece.rstrip())))
    return blocks


def split_fences(
    text: str, chunks: Sequence[Chunk], size_of: object, cap: int
) -> list[tuple[int, int]]:
    """The fenced blocks within the cap that no chunk holds whole."""
    measure = size_of if callable(size_of) else len
    return [
        (a, b)
        for a, b in fenced_blocks(text)
        if measure(text[a:b]) <= cap
        and not any(c.start_index <= a and b <= c.end_index for c in chunks)
    ]


def heading_only(text: str, chunks: Sequence[Chunk]) -> list[Chunk]:
    """Chunks made of nothing but markdown headings and thematic breaks (outside fences)."""
    fences = fenced_blocks(text)
    marks = [
        (b.start, b.end)
        for b in split_blocks(text)
        if b.kind in ("heading", "thematic_break") and not any(a <= b.start < e for a, e in fences)
    ]
    found = []
    for chunk in chunks:
        rest = text[chunk.start_index : chunk.end_index]
        for a, b in marks:
            if chunk.start_index <= a and b <= chunk.end_index:
                local = a - chunk.start_index
                rest = rest[:local] + " " * (b - a) + rest[local + b - a :]
        if not rest.strip():
            found.append(chunk)
    return found
