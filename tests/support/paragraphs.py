"""Paragraphs of plain text: the seams the seam benchmarks and tests score boundaries against
(pieces separated by blank lines). Only tests and bench/ read them: no strategy does."""

from __future__ import annotations

import re

from worker.chunking.types import Span

# A blank line: a line break, then only spaces/tabs/CR, then another line break.
_PARAGRAPH_BREAK = re.compile(r"\n[^\S\n]*\n")


def split_paragraphs(text: str) -> list[Span]:
    """Paragraphs of plain text: pieces separated by blank lines, without surrounding space."""
    spans: list[Span] = []
    start = 0
    for end, after in [(m.start(), m.end()) for m in _PARAGRAPH_BREAK.finditer(text)] + [
        (len(text), len(text))
    ]:
        piece = text[start:end]
        stripped = piece.strip()
        if stripped:
            begin = start + len(piece) - len(piece.lstrip())
            spans.append(Span(begin, begin + len(stripped)))
        start = after
    return spans
