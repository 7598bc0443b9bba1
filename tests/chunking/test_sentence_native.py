"""The compiled core of ``sentence`` gives exactly the chunks of its pure-Python twin.

``SentenceChunker.chunk`` runs the core (``_sentence_core.c``) when it is built, in characters
and in tokens (it hands a document back to the twin only when a token piece is over the cap);
``chunk_reference`` is the Python definition. Whole Chunk lists are compared.
"""

from __future__ import annotations

import gc
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.corpus import gather
from tests.support.texts import DECISIONS, any_text, long_documents, surrogate_text
from worker.chunking import _native as native
from worker.chunking.rules import sentence
from worker.chunking.rules.sentence import SentenceChunker, SentenceParams
from worker.chunking.rules.sizing import Sizing
from worker.chunking.text.tokens import piece_counter

pytestmark = pytest.mark.skipif(
    sentence.compiled() is None,
    reason="compiled core not built (tests/chunking/test_native.py fails when it must be)",
)

sizes = st.integers(min_value=1, max_value=400)


def _same(text: str, size: int, tokenizer: str = "character") -> None:
    chunker = SentenceChunker(SentenceParams(chunk_size=size, tokenizer=tokenizer))
    native = chunker.chunk(text)
    assert native == chunker.chunk_reference(text)
    assert [type(v) for c in native for v in c.metadata.values()] == [int] * len(native)
    assert all(type(c.token_count) is int for c in native)


@settings(max_examples=400, deadline=None)
@given(any_text, sizes)
def test_same_chunks_on_generated_texts(text: str, size: int) -> None:
    _same(text, size)


@settings(max_examples=80, deadline=None)
@given(long_documents, sizes)
def test_same_chunks_on_long_documents(text: str, size: int) -> None:
    _same(text, size)


@settings(max_examples=60, deadline=None)
@given(surrogate_text, sizes)
def test_same_chunks_with_lone_surrogates(text: str, size: int) -> None:
    _same(text, size)


@settings(max_examples=40, deadline=None)
@given(any_text, st.integers(min_value=2, max_value=40))
def test_same_chunks_with_a_tokenizer(tokenizer_path: str, text: str, size: int) -> None:
    _same(text, size, tokenizer_path)


def test_same_chunks_on_the_benchmark_corpus(tokenizer_path: str) -> None:
    docs = gather()
    assert len(docs) >= 50, "the corpus of installed package descriptions is missing"
    for doc in docs:
        for size in (1000, 1500, 97):
            _same(doc.text, size)
    for doc in docs:
        _same(doc.text, 254, tokenizer_path)


@pytest.mark.parametrize("text", DECISIONS)
def test_every_cut_position_agrees(text: str) -> None:
    # Every cap from 1 to the text's length puts each position at a chunk limit in turn.
    for cap in range(1, len(text) + 2):
        _same(text, cap)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n\t ",
        "a",
        "Plain ASCII. Two sentences here! And a third?",
        "Latin-1 café. Déjà vu. Naïve résumé.",
        "Curly “quotes” … and an ellipsis… Then more.",
        "Emoji 👩‍💻 here. And 🇫🇷 there. Done.",
        "Wrapped prose that goes\non over lines. And\r\nCRLF lines too.\u2028Then a separator.",
        "```\ncode = 1.\nmore = 2.\n```\nwrapped prose\nafter the fence. More prose.",
        "  ```\nindented fence\n~~~\nstill code\n```\nout\nof it",
        "x" * 200,
        "word " * 100,
        "- item one\n- item two\nwrapped\n\n# Heading\nText\n1. first\n2) second",
        "end…\nquoted “a… b” c",
    ],
)
def test_storage_widths_and_edges(text: str) -> None:
    for size in (1, 3, 10, 40, 1000):
        _same(text, size)


def test_the_cap_is_checked() -> None:
    core = sentence.compiled()
    assert core is not None
    with pytest.raises(ValueError, match="cap"):
        core("text", 0, None, None, None)


def test_a_token_piece_over_the_cap_without_a_cutter_goes_to_the_twin(tokenizer_path: str) -> None:
    # Cutting a piece at characters needs exact counts of its prefixes (a Python tokenizer):
    # without word_cuts.cut_word the core declines the document (chunk() hands it one, and
    # tests/chunking/test_cut_word_native.py holds the core's own cuts to the twin's).
    counter = piece_counter(tokenizer_path)
    core = sentence.compiled()
    assert core is not None
    long_word = "ab-" * 30  # one piece (no space, no sentence mark) of 60 tokens
    text = f"A short sentence. {long_word} and more."
    memory = native.piece_memory(counter)
    assert core(text, 8, memory, counter.count_pieces, None) is None
    assert core("A short sentence.", 8, memory, counter.count_pieces, None)
    chunker = SentenceChunker(SentenceParams(chunk_size=8), Sizing(counter))
    assert chunker.chunk(text) == chunker.chunk_reference(text)


def test_no_memory_is_kept_between_documents() -> None:
    docs = [d.text for d in gather()[:40]]
    chunker = SentenceChunker()

    def run() -> None:
        for text in docs:
            chunker.chunk(text)

    run()
    gc.collect()
    tracemalloc.start()
    try:
        run()
        gc.collect()
        first = tracemalloc.get_traced_memory()[0]
        for _ in range(5):
            run()
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert after - first < 16 * 1024, f"traced memory grew by {after - first} bytes"
