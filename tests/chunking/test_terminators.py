"""The sentence terminators are stated once (worker/chunking/text/terminators.py): every
Python splitter uses that module, and the C rules header states exactly the same sets."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from worker.chunking.text import segment, terminators

HEADER = (
    Path(__file__).resolve().parents[2] / "worker" / "chunking" / "_native" / "_sentence_rules.h"
)


def c_set(function: str) -> set[str]:
    """The characters a ``static inline int function(Py_UCS4 c)`` of the header accepts."""
    source = HEADER.read_text(encoding="utf-8")
    match = re.search(rf"static inline int {function}\(Py_UCS4 c\)\s*\{{(.*?)\}}", source, re.S)
    assert match, function
    body = match.group(1)
    chars = {chr(int(code, 16)) for code in re.findall(r"0x([0-9A-Fa-f]+)", body)}
    escapes = {"\\'": "'", "\\\\": "\\", "\\r": "\r", "\\n": "\n"}
    for literal in re.findall(r"'(\\.|[^'\\])'", body):
        chars.add(escapes.get(literal, literal))
    return chars


@pytest.mark.parametrize(
    ("function", "expected"),
    [
        ("is_line_break", terminators.LINE_BREAKS),
        ("is_latin_stop", terminators.LATIN),
        ("is_latin_closer", terminators.LATIN_CLOSERS),
        ("is_cjk_stop", terminators.CJK),
        ("is_cjk_closer", terminators.CJK_CLOSERS),
        ("is_arabic_stop", terminators.ARABIC),
    ],
)
def test_the_c_rules_state_the_same_sets(function: str, expected: str) -> None:
    assert c_set(function) == set(expected)


def test_every_terminator_is_a_sentence_end_candidate_in_python() -> None:
    for mark in terminators.ALL:
        text = f"word{mark} Next"
        assert segment.CANDIDATE.search(text), mark
