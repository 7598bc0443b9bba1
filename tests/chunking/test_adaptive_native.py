"""The compiled core of ``adaptive`` gives exactly the chunks of its pure-Python twin.

``AdaptiveChunker.chunk`` runs the core (``_adaptive_core.c``) when it is built;
``chunk_reference`` is the Python definition. Every comparison is of whole Chunk lists:
offsets, text, token counts, and metadata values and types.
"""

from __future__ import annotations

import gc
import sys
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.chunking.texts import FRAGMENTS, any_text
from worker.chunking import adaptive
from worker.chunking.adaptive import AdaptiveChunker

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.corpus import gather

pytestmark = pytest.mark.skipif(
    adaptive.NATIVE_CHUNK is None,
    reason="compiled core not built (tests/chunking/test_native.py fails when it must be)",
)

# Word pools that make long documents: many distinct words (the core's vocabulary table
# grows), repeats near and far (the 50-word window), technical and stop words, decimals,
# code punctuation, fences, Arabic complex words and sentence marks of every script.
VOCABULARY = [f"w{i}x" for i in range(700)] + [
    "the", "The", "and", "def", "SELECT", "API", "json", "3.14", "v1.2.3", "{", "};", "=",
    "e.g.", "Dr.", "U.S.", "1.", "...", "…", "?", "!", ".", "\n", "\n\n", "```\n", "~~~\n",
    "الخوارزميات", "والمستخدمين", "مرحبا", "؟", "۔", "؛", "،", "。", "！", "？", "”", '"',
    "\u0670", "\u064b", "\u3000", "\xa0", "\t", "\r\n", "\x00", "\ud800",
    # case and digit rules outside ASCII: KELVIN SIGN lower-cases to "k" (U.K. is an
    # abbreviation), U+0130 does not lower-case to ASCII, Arabic-Indic digits are digits
    "U.\u212a.", "\u212ao.", "\u0130.", "\n\u0661.", "\n\u0661\u0662\u0663\u0664.", "\u00c9.",
]  # fmt: skip
long_documents = st.lists(st.sampled_from(VOCABULARY + FRAGMENTS), min_size=50, max_size=1500).map(
    " ".join
)
surrogate_text = st.text(
    alphabet=st.characters(codec=None, exclude_categories=()), max_size=200
).map(lambda t: t + "\ud83d. Next \udc00 one.")

params = st.fixed_dictionaries(
    {
        "base_size": st.integers(min_value=1, max_value=600),
        "min_size": st.integers(min_value=1, max_value=200),
        "spread": st.integers(min_value=0, max_value=1500),
        "overlap": st.integers(min_value=0, max_value=300),
        "technical_threshold": st.floats(min_value=0.0, max_value=1.0),
        "language": st.sampled_from(["auto", "ar", "en"]),
    }
)


def _chunker(p: dict[str, object]) -> AdaptiveChunker:
    spread = p.pop("spread")
    p["max_size"] = int(p["min_size"]) + int(spread)  # type: ignore[call-overload]
    return AdaptiveChunker(**p)  # type: ignore[arg-type]


def _same(chunker: AdaptiveChunker, text: str, doc_id: str = "", source: str = "") -> None:
    native = chunker.chunk(text, doc_id, source)
    reference = chunker.chunk_reference(text, doc_id, source)
    assert native == reference
    # Struct equality compares values; metadata types must agree too (1 vs 1.0, bools).
    for a, b in zip(native, reference, strict=True):
        assert [type(v) for v in a.metadata.values()] == [type(v) for v in b.metadata.values()]
        assert list(a.metadata) == list(b.metadata)


@settings(max_examples=300, deadline=None)
@given(any_text, params, st.sampled_from(["", "doc-1"]), st.sampled_from(["", "s3://x"]))
def test_same_chunks_on_generated_texts(
    text: str, p: dict[str, object], doc_id: str, source: str
) -> None:
    _same(_chunker(p), text, doc_id, source)


@settings(max_examples=60, deadline=None)
@given(long_documents, params)
def test_same_chunks_on_long_documents(text: str, p: dict[str, object]) -> None:
    _same(_chunker(p), text)


@settings(max_examples=60, deadline=None)
@given(surrogate_text, params)
def test_same_chunks_with_lone_surrogates(text: str, p: dict[str, object]) -> None:
    _same(_chunker(p), text)


def test_same_chunks_on_the_benchmark_corpus() -> None:
    docs = gather()
    assert len(docs) >= 50, "the corpus of installed package descriptions is missing"
    defaults = AdaptiveChunker()
    small = AdaptiveChunker(base_size=128, min_size=50, max_size=400, overlap=60, language="en")
    for doc in docs:
        _same(defaults, doc.text, "id", "src")
        _same(small, doc.text)


def test_three_storage_widths_and_edges() -> None:
    chunker = AdaptiveChunker(min_size=5, max_size=40, overlap=10, base_size=16)
    for text in (
        "",
        "   \n\t ",
        "a",
        "Plain ASCII. Two sentences here! And a third?",
        "Latin-1 café. Déjà vu. Naïve résumé.",  # 1 byte per character
        "Curly “quotes” … and an ellipsis… Then more.",  # 2 bytes
        "Emoji 👩‍💻 here. And 🇫🇷 there. Done.",  # 4 bytes
        "```\ncode = 1;\n```\nprose after the fence. More prose.",
        "x" * 200,
        "word " * 100,
        "Visit the U.\u212a. Then go home. It is late.",
        "Items:\n\u0661. first thing here\n\u0662. second thing here",
        "The \u0130. Next one. And \u212ao. Done.",
    ):
        _same(chunker, text)


# Each text hinges on one sentence-end decision (abbreviations, initials, list numbers,
# lower-case continuations, ellipses in quotes, closers), inside and outside ASCII.
DECISIONS = [
    "Visit the U.\u212a. Then go home. It is late.",
    "Visit the U.K. Then go home. It is late.",
    "Items:\n\u0661. First thing here\n\u0662. Second thing here",
    "Items:\n12. First thing here\n1234. Second thing here",
    "The \u0130. Next one. And \u212ao. Done. \u00c9. End.",
    "Dr. Who met J. R. R. Tolkien. e.g. this. Fig. 3 shows it. See p. 4.",
    'He said "wait... and see" and left. "Really?" she asked. Yes!',
    "\u201cWell\u2026 maybe\u201d. Then: (done.) [ok!] Next\u2019s turn.",
    "Version 3.14 and v1.2.3 at https://x.io/a.b?c=d. Mail a@b.org. Fine.",
    "中文。「引用！」啊？مرحبا؟ نعم۔ 한국어. Done",
]


@pytest.mark.parametrize("text", DECISIONS)
def test_every_cut_position_agrees(text: str) -> None:
    # A target equal to the cap makes every position of the text a limit in turn, so every
    # sentence-end decision the text holds becomes a chunk boundary somewhere.
    for cap in range(2, len(text) + 2):
        for overlap in (0, cap // 2):
            chunker = AdaptiveChunker(min_size=cap, max_size=cap, overlap=overlap, base_size=8)
            _same(chunker, text)


def test_long_texts_take_the_python_path(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "One sentence. Another one here. " * 20
    chunker = AdaptiveChunker(min_size=20, max_size=80)
    expected = chunker.chunk_reference(text)
    calls: list[str] = []
    real = adaptive.NATIVE_CHUNK
    assert real is not None

    def counted(*args: object) -> object:
        calls.append("native")
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(adaptive, "NATIVE_CHUNK", counted)
    monkeypatch.setattr(adaptive, "NATIVE_MAX_CHARS", len(text))
    assert chunker.chunk(text) == expected
    assert calls == []
    monkeypatch.setattr(adaptive, "NATIVE_MAX_CHARS", len(text) + 1)
    assert chunker.chunk(text) == expected
    assert calls == ["native"]


def test_no_memory_is_kept_between_documents() -> None:
    docs = [d.text for d in gather()[:40]]
    chunker = AdaptiveChunker()

    def run() -> None:
        for text in docs:
            chunker.chunk(text, "id", "src")

    run()  # warm caches (interned strings, the vocabulary's first tables)
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
    # A leak of one object per chunk would be thousands of blocks: allow a few KiB of noise.
    assert after - first < 16 * 1024, f"traced memory grew by {after - first} bytes"
