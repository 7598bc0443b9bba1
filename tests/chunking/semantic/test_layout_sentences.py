"""The embedding layout's paragraph sentences in C (the sentence core's ``sentences``,
``_native/_layout_sentences.h``) are ``segment.split_sentences(text[start:end], clauses=...,
soft_wraps=True)``, its definition: on generated text made of everything its rules look at
(terminators of three scripts and their closers, abbreviations, initials, list numbers, every
line break, fences, lines that open blocks, indentation, quotes, ellipses, Arabic commas), cut
anywhere; on every page of the package corpus; and the layouts read with it and without it are
the same."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.support.corpus import gather
from worker.chunking import _native
from worker.chunking.semantic import layout
from worker.chunking.text.segment import split_sentences

pytestmark = pytest.mark.skipif(
    _native.layout_sentences() is None,
    reason="the sentence core is not built (test_native.py fails CI when it is not)",
)

_FRAGMENTS = [
    "Word", "word", "the end", "Dr.", "e.g.", "U.S.", "etc.", "No.", "x.", "3.14", "v1.2",
    ".", ". ", "! ", "? ", "?!", "…", "...", ".\"", ".”", ".)", "」", "。", "！", "？", "。」",
    "؟", "۔", "؛", "،", "مرحبا", "東京", " ", "  ", "\t", "\n", "\n\n", "\r\n", "\r",
    "\u2028", "\u2029", "\u00a0", "\x0b", "```", "~~~", "  ```", "- ", "-", "* ", "+ ", "#",
    "# ", "> ", "|", "=", "<div>", "</p>", "<a", "1. ", "12) ", "1.", "    indented", "\"",
    "“", "”", "(", "[", "«", "»", "'", "a.b", "http://x.y/z?q=1", "naïve", "Ünïcode.",
]  # fmt: skip
texts = st.lists(
    st.one_of(st.sampled_from(_FRAGMENTS), st.text(max_size=6)), min_size=0, max_size=40
).map("".join)


def python_sentences(text: str, start: int, end: int, clauses: bool) -> list[int]:
    spans = split_sentences(text[start:end], clauses=clauses, soft_wraps=True)
    return [offset for s in spans for offset in (s.start + start, s.end + start)]


def compiled(text: str, start: int, end: int, clauses: bool) -> list[int]:
    native = _native.layout_sentences()
    assert native is not None
    return native(text, start, end, clauses)


@settings(max_examples=800, deadline=None)
@given(texts, st.data(), st.booleans())
@example("Dr. Smith came.\nHe left. 1. item\n```\ncode.\n```\nEnd", None, False)
@example("a\r\nb\r\n\r\nc。」d؟ e، f", None, True)
@example("Text\n```\nline one\nline two\n```\nmore text\nwrapped", None, False)
@example('He said "wait…" and went. Then\n- a list', None, False)
def test_the_same_sentences_as_the_python_definition(
    text: str, data: st.DataObject | None, clauses: bool
) -> None:
    start, end = 0, len(text)
    if data is not None and text:
        start = data.draw(st.integers(0, len(text)))
        end = data.draw(st.integers(start, len(text)))
    assert compiled(text, start, end, clauses) == python_sentences(text, start, end, clauses)


def test_the_same_sentences_on_every_page_of_the_corpus() -> None:
    docs = gather()
    assert len(docs) >= 50, "the corpus of installed package descriptions is missing"
    for doc in docs:
        for clauses in (False, True):
            got = compiled(doc.text, 0, len(doc.text), clauses)
            assert got == python_sentences(doc.text, 0, len(doc.text), clauses), doc.name


def test_the_same_layouts_with_and_without_the_core(monkeypatch: pytest.MonkeyPatch) -> None:
    """The layout reaches the core through the seam on its own (no strategy needs to have
    configured it first: a fresh process, below), and the switch turns it off."""
    docs = gather()
    with_core = [layout.read_atoms(doc.text, 40) for doc in docs]
    monkeypatch.setenv(_native.PURE_PYTHON_ENV, "1")
    assert _native.layout_sentences() is None
    for doc, expected in zip(docs, with_core, strict=True):
        python = layout.read_atoms(doc.text, 40)
        for column in ("starts", "ends", "kinds", "levels"):
            assert np.array_equal(
                np.asarray(getattr(python, column)), np.asarray(getattr(expected, column))
            ), doc.name


def test_offsets_outside_the_text_are_refused() -> None:
    with pytest.raises(ValueError, match="start <= end"):
        compiled("abc", 2, 1, False)
    with pytest.raises(ValueError, match="start <= end"):
        compiled("abc", 0, 4, False)


def test_the_layout_configures_the_core_it_reads_itself() -> None:
    """Abbreviations hold in a process where no `sentence` chunker ever configured the core."""
    code = (
        "from worker.chunking.semantic import layout;"
        "atoms = layout.read_atoms('Dr. Smith arrived. He sat down.', 0);"
        "print(len(atoms.starts))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "2"  # "Dr." ends no sentence
