"""A markdown heading's words, for tests that check what worker.chunking.text.markdown found
(the chunkers never need the words, only the blocks)."""

from __future__ import annotations

import re

from worker.chunking.text.markdown import Block

_ATX_MARKS = re.compile(r"^[ \t]*#{1,6}[ \t]*|[ \t]+#+[ \t]*$")
_SETEXT_UNDERLINE = re.compile(r"\s*\n[ \t]*(?:=+|-+)[ \t]*$")


def heading_text(text: str, block: Block) -> str:
    """A heading's words without its ``#`` marks or setext underline, whitespace folded."""
    raw = text[block.start : block.end]
    raw = _SETEXT_UNDERLINE.sub("", raw) if not raw.lstrip().startswith("#") else raw
    return " ".join(_ATX_MARKS.sub("", raw).split())
