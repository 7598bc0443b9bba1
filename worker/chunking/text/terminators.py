"""The characters that end a sentence, and the closers that stay with it: stated once.

Invariants:

- Every sentence splitter here reads its marks from this module: segmentation
  (:mod:`.segment`), the rule strategies' units and token pieces (:mod:`.units`) and the
  soft-wrap rejoining of the embedding strategies (:mod:`worker.chunking.semantic.units`).
- The compiled cores state the same sets in C (``_native/_sentence_rules.h``, whose comments
  point here); the twin-versus-core tests (tests/chunking/test_*_native.py) run both on
  arbitrary text, so a set changed on one side only fails them.
- A Latin terminator ends a sentence only when whitespace or the end follows (after its
  closers); CJK and Arabic marks end it where they stand.
"""

from __future__ import annotations

from typing import Final

LATIN: Final = ".!?…"
"""Latin terminators; a run of them ends a sentence when whitespace (or the end) follows."""
CJK: Final = "。！？"
"""CJK terminators: a sentence end with or without a following space."""
ARABIC: Final = "؟۔؛"
"""Arabic question mark, full stop and semicolon: a sentence end where they stand."""
LATIN_CLOSERS: Final = "”’\"'»)]"
"""Closing quotes and brackets that stay with a sentence ended by a Latin terminator."""
CJK_CLOSERS: Final = "」』”’\"'）)]"
"""Closing quotes and brackets that stay with a sentence ended by a CJK terminator."""
LINE_BREAKS: Final = "\r\n\u2028\u2029"
"""Characters that always end a sentence (a line break)."""
ALL: Final = LATIN + CJK + ARABIC
"""Every terminator."""
