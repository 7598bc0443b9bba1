"""The compiled `lexical` core returns exactly what the Python reference returns.

Exactly: the same chunks, offsets and text, and metadata with the same keys in the same
order, values of the same types (1 is not 1.0 is not True) and the same floats. Compared on
generated documents of both content types and on every document of the benchmark corpus.

Without the compiled core these tests skip, unless CHUNKSTREAM_REQUIRE_NATIVE=1 (CI), where
a missing core is a failure.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.corpus import gather
from tests.support.texts import FRAGMENTS, any_text
from worker.chunking._native import REQUIRE_NATIVE_ENV
from worker.chunking.rules import lexical
from worker.chunking.rules.lexical import LexicalChunker
from worker.chunking.types import Chunk, ContentType

if lexical.compiled() is None:
    if os.environ.get(REQUIRE_NATIVE_ENV) == "1":
        pytest.fail("the compiled lexical core is required but not built", pytrace=False)
    pytest.skip("the compiled lexical core is not built", allow_module_level=True)

from worker.chunking._native import _lexical_core

NATIVE = LexicalChunker()
CONTENT_TYPES: list[ContentType] = ["text/plain", "text/markdown"]
DIFFERENTIAL = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def exact(value: Any) -> Any:
    """``value`` with the type of every part made explicit (== alone says 1 == 1.0 == True)."""
    if isinstance(value, dict):
        return ("dict", [(key, exact(item)) for key, item in value.items()])
    if isinstance(value, list | tuple):
        return (type(value).__name__, [exact(item) for item in value])
    if isinstance(value, float):
        return ("float", value.hex())
    return (type(value).__name__, value)


def fields(chunk: Chunk) -> Any:
    return exact(
        [
            chunk.text,
            chunk.start_index,
            chunk.end_index,
            chunk.token_count,
            chunk.strategy,
            chunk.metadata,
            chunk.spans,
        ]
    )


def assert_same(text: str, content_type: ContentType, doc_id: str = "", source: str = "") -> bool:
    """Compares the two paths; True when the core handled the document itself."""
    reference = NATIVE.chunk_reference(text, doc_id, source, content_type=content_type)
    native = NATIVE.chunk(text, doc_id, source, content_type=content_type)
    assert native == reference
    assert [fields(c) for c in native] == [fields(c) for c in reference]
    return _lexical_core.chunk(text, doc_id, source, NATIVE.sizes.cap, None, None) is not None


# Long blocks (past the 1,500-character cap), sentence marks, markdown at line starts and
# the characters the core hands back to the reference (İ, K, Σ, ı, ſ).
_PIECES = [
    *FRAGMENTS,
    "garden", "Gardens", "tomatoes", "watering", "THESE", "about", "Thistles", "so", "So,",
    "however", "for example", "e.g.", "This", "Finally,", "Next", "1. ", "12) ", "> ",
    "?", ":", "? ", ": ", "\n\n", "\n", " ", "  ", "word " * 40, "x" * 1600, "a.b.c. ",
    "No. 5 ", "1.\n", "Über", "Ünïcödé", "naïve", "ΟΔΟΣ", "σ", "İstanbul", "\u212a", "ı", "ſ",
    "\u2160", "²", "١٢٣. ", "\ud800", "\udfff", "\u2028", "\x85", "\x0c", "\x1c", "\u3000",
    "“quoted… ", "”", "» ", "‘", "(", "[", "« ", "<script>\n", "</SCRIPT>\n", "<pre x>\n",
    "<!--\n", "-->\n", "~~~\n", "```\n", "```js `x`\n", "    ", "\t", "   ---\n", "- - -\n",
    "## Title ##\n", "#hashtag\n===\n", "Title\n---\n", "Title\r---\n", "|---|:-:|\n",
    "| a |\n", "+++\n", "...\n", "<div/>\n", "<?x?>\n", "<!DOCTYPE>\n", "</a>\n",
]  # fmt: skip
pieces = st.sampled_from(_PIECES)
long_documents = st.lists(st.one_of(pieces, pieces, st.text(max_size=8)), max_size=400).map("".join)
texts = st.one_of(any_text, long_documents, st.text(max_size=400))


@DIFFERENTIAL
@given(texts, st.sampled_from(CONTENT_TYPES))
def test_same_chunks_as_the_reference(text: str, content_type: ContentType) -> None:
    assert_same(text, content_type)


@settings(DIFFERENTIAL, max_examples=60)
@given(
    long_documents,
    st.sampled_from(CONTENT_TYPES),
    st.sampled_from(["", "doc-1"]),
    st.sampled_from(["", "s3://x"]),
)
def test_doc_id_and_source(text: str, content_type: ContentType, doc_id: str, source: str) -> None:
    assert_same(text, content_type, doc_id, source)


@pytest.mark.parametrize("text", ["", " ", "\n\n", "x", "\ud800", "# ", "#", "```", "İ"])
@pytest.mark.parametrize("content_type", CONTENT_TYPES)
def test_edge_documents(text: str, content_type: ContentType) -> None:
    assert_same(text, content_type)


def test_hands_rare_case_mappings_to_the_reference() -> None:
    for char in ["İ", "\u212a", "Σ", "ı", "ſ"]:
        assert _lexical_core.chunk(f"text {char} text", "", "", 1500, None, None) is None
    assert _lexical_core.chunk("Ünïcödé 中文 مرحبا ΟΔΟ σ", "", "", 1500, None, None) is not None


def test_every_corpus_document() -> None:
    docs = gather()
    assert docs, "the benchmark corpus is empty: nothing would be compared"
    fast = sum(assert_same(doc.text, doc.content_type, doc.name, "corpus") for doc in docs)
    # The documents the core hands back must stay rare (all 175 ran native when written).
    assert fast >= 0.9 * len(docs), f"only {fast} of {len(docs)} documents on the compiled path"


@pytest.mark.parametrize("length", [1437, 1438, 1500, 1501, 3000])
@pytest.mark.parametrize("offset", [0, 1, 63, 64])
@pytest.mark.parametrize("content_type", CONTENT_TYPES)
def test_words_around_the_cap(length: int, offset: int, content_type: ContentType) -> None:
    """A whitespace-free run past the cap changes how the reference counts keywords."""
    word = "ab" + "x" * (length - 2)
    assert_same(f"{' ' * offset}{word} tail words here\n\nThis one, too.", content_type)
    assert_same(f"{'é' * offset}\n{word}.b {'word ' * 50}", content_type)


# Each text hinges on sentence-end decisions of segment.false_stop_at (abbreviations,
# initials, list numbers, lower-case continuations, ellipses in open quotes, closers, the
# 40-character word window), inside and outside ASCII. The core reads them with the rules it
# shares with the adaptive core (_sentence_rules.h).
SENTENCE_DECISIONS = [
    "Visit the U.K. Then go home. It is late.",
    "\u0661. First thing here\n\u0662. Second thing here",
    "12. First thing here\n1234. Second thing here\n1. Third",
    "Dr. Who met J. R. R. Tolkien. e.g. this. Fig. 3 shows it. See p. 4. \u00c9. End.",
    'He said "wait... And see" and left. "Really?" She asked. "Wait... Go." Yes!',
    "\u201cWell\u2026 Maybe\u201d. Then: (done.) [ok!] Next\u2019s turn. \u00abNo.\u00bb Fine.",
    "Version 3.14 and v1.2.3 at https://x.io/a.b?c=d. Mail a@b.org. Fine.",
    f"{'(' * 38}Dr. Who. x{'(' * 37}Dr. Who. x{'(' * 38}Dr. Who. {'y' * 41}Dr. Who.",
    "中文。「引用！」啊？مرحبا؟ نعم۔ 한국어. Done",
    "It ends. \u00e9lan vital. \u03c9 too. \u00c9lan. Right.",
]


@pytest.mark.parametrize("decision", SENTENCE_DECISIONS)
@pytest.mark.parametrize("content_type", CONTENT_TYPES)
def test_sentence_decisions_in_over_long_blocks(decision: str, content_type: ContentType) -> None:
    """A block past the cap is packed from its sentences, so a sentence end decides a cut when
    it is the last one within the cap: the words before the decisions grow one character at a
    time so that each decision's place is that last one in turn. The block starts the text,
    or follows a blank line and two spaces."""
    words = "Abcd " * 400
    for lead in ("", "Lead.\n\n  "):
        for size in range(1500 - len(decision) - 8, 1501):
            assert_same(f"{lead}{words[:size]}. {decision} Tail sentence here.", content_type)


@pytest.mark.parametrize("number", ["1", "12", "123", "1234", "\u0661", "\u0661\u0662", "x1"])
@pytest.mark.parametrize("content_type", CONTENT_TYPES)
def test_list_numbers_at_a_block_start(number: str, content_type: ContentType) -> None:
    """ "12." at a block's start numbers a list item (the block's start reads as a line's),
    which decides a cut when the sentence it would end crosses the cap."""
    words = "Abcd " * 400
    for lead in ("", "Lead.\n\n  ", "Lead.\n\n\t"):
        for size in range(1490, 1503):
            assert_same(f"{lead}{number}. {words[:size]}. Tail sentence here.", content_type)


def test_a_large_document_leaves_no_large_buffers_behind() -> None:
    # The core keeps its scratch buffers between documents, but not past a few MiB: one
    # 10 M-character document must not pin 100-200 MB for the life of the worker.
    import gc
    import tracemalloc

    paragraph = "Words of prose that run on for a while, with a keyword or two. " * 20
    text = "\n\n".join([paragraph] * 8000)
    assert len(text) > 10_000_000
    chunker = LexicalChunker()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        chunks = chunker.chunk(text, content_type="text/plain")
        assert chunks
        del chunks
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 16 << 20, f"{held / 1e6:.0f} MB still held after the document"
