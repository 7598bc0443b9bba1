"""The compiled core of ``adaptive`` gives exactly the chunks of its pure-Python twin.

``AdaptiveChunker.chunk`` runs the core (``_adaptive_core.c``) when it is built;
``chunk_reference`` is the Python definition. Every comparison is of whole Chunk lists:
offsets, text, token counts, and metadata values and types.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import tracemalloc

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.corpus import gather
from tests.support.texts import DECISIONS, any_text, long_documents, surrogate_text
from worker.chunking.rules import adaptive
from worker.chunking.rules.adaptive import AdaptiveChunker
from worker.chunking.text.density import word_hash

pytestmark = pytest.mark.skipif(
    adaptive.compiled() is None,
    reason="compiled core not built (tests/chunking/test_native.py fails when it must be)",
)


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
    real = adaptive.compiled()
    assert real is not None

    def counted(*args: object) -> object:
        calls.append("native")
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(adaptive, "compiled", lambda: counted)
    monkeypatch.setattr(adaptive, "NATIVE_MAX_CHARS", len(text))
    assert chunker.chunk(text) == expected
    assert calls == []
    monkeypatch.setattr(adaptive, "NATIVE_MAX_CHARS", len(text) + 1)
    assert chunker.chunk(text) == expected
    assert calls == ["native"]


def _words_aimed_at_one_slot(count: int) -> str:
    """Distinct two-character words whose hashes all share their top bits after multiplying
    by the golden-ratio constant: with that multiplier fixed, they would pile up in a few
    slots of the core's vocabulary table (every lookup a long probe, quadratic in the words).

    word_hash(a + b) = (ord(a) + 1) + (ord(b) + 1) * P modulo 2**32. Hashes with equal top
    bits are x * golden**-1 for consecutive x; for each, a CJK second character whose part
    (ord(b) + 1) * P lies just below the hash leaves a CJK first character to complete it."""
    modulus = 1 << 32
    golden_inverse = pow(0x9E3779B1, -1, modulus)
    block = np.arange(0x4E00, 0x9F00, dtype=np.int64)  # CJK: word characters only
    parts = (block + 1) * 0x01000193 % modulus
    order = np.argsort(parts)
    parts, seconds = parts[order], block[order]
    steps = np.arange(40 * count, dtype=np.int64)
    targets = ((0x1234 << 20) + steps) * golden_inverse % modulus
    # The largest part not above target - (0x4E00 + 1): the first character is then >= 0x4E00.
    index = np.searchsorted(parts, targets - 0x4E01, side="right") - 1
    firsts = targets - parts[np.maximum(index, 0)] - 1
    usable = (index >= 0) & (firsts < 0x9F00)
    firsts, chosen = firsts[usable][:count], seconds[np.maximum(index, 0)][usable][:count]
    assert len(firsts) == count
    words = [chr(a) + chr(b) for a, b in zip(firsts.tolist(), chosen.tolist(), strict=True)]
    aimed = targets[usable][:50].tolist()
    assert [word_hash(w) for w in words[:50]] == aimed
    return " ".join(words)


@pytest.mark.timeout(30)
def test_words_crafted_to_collide_do_not_stall_the_core() -> None:
    # A liveness guard, not a benchmark: with the vocabulary's multiplier fixed, this text
    # took over a minute (20 s at half its words, ~3.5x per doubling); with the
    # multiplier and key drawn per process it takes milliseconds. The chunks are unchanged.
    text = _words_aimed_at_one_slot(320_000)
    chunker = AdaptiveChunker()
    assert chunker.chunk(text[:30_000]) == chunker.chunk_reference(text[:30_000])
    assert len(chunker.chunk(text)) > 100


def test_the_random_table_layout_never_shows_in_the_output() -> None:
    # Each process draws its own seed for the core's tables: another process must produce
    # exactly the same chunks.
    text = " ".join(gather()[0].text.split()[:3000])
    code = (
        "import sys, msgspec; from worker.chunking.rules.adaptive import AdaptiveChunker;"
        "sys.stdout.buffer.write(msgspec.json.encode(AdaptiveChunker().chunk(sys.stdin.read())))"
    )
    runs = [
        subprocess.run(
            [sys.executable, "-c", code], input=text, capture_output=True, text=True, check=True
        ).stdout
        for _ in range(2)
    ]
    here = msgspec.json.encode(AdaptiveChunker().chunk(text)).decode()
    assert runs[0] == runs[1] == here


def test_size_parameters_are_bounded() -> None:
    # Larger sizes would overflow offsets in the core's integers (and wrap in numpy's).
    with pytest.raises(ValueError, match="max_size"):
        AdaptiveChunker(max_size=(1 << 29) + 1)
    with pytest.raises(ValueError, match="base_size"):
        AdaptiveChunker(base_size=1 << 63)
    AdaptiveChunker(min_size=1 << 29, max_size=1 << 29, base_size=1 << 29, overlap=1 << 29)


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
