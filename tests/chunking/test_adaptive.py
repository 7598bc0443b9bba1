from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.chunk_invariants import assert_all
from tests.support.texts import any_text
from tests.support.token_counters import make_counter
from worker.chunking import registry
from worker.chunking.rules.adaptive import AdaptiveChunker
from worker.chunking.text.density import density
from worker.chunking.types import Chunk, RuleChunker

CHARS = make_counter()
PROSE = (
    "Once upon a time there lived a miller who had three sons and a small mill by the river. "
    "Every morning the miller walked to the village to sell his flour, and every evening he "
    "came home tired but happy. His youngest son loved to sit by the water and watch the "
    "wheel turn, dreaming of the wide world beyond the hills. "
)
CODE = (
    "```python\n"
    "def handler(request: Request) -> Response:\n"
    "    data = json.loads(request.body)\n"
    "    rows = db.query('SELECT id FROM users WHERE id = %s', [data['id']])\n"
    "    return Response(status=200, body={'rows': rows})\n"
    "```\n"
)


def test_density_examples() -> None:
    assert density("def fib(n): return n if n < 2 else fib(n - 1) + fib(n - 2)") >= 0.6
    assert density("Once upon a time, a little princess lived in a castle with the king.") <= 0.25
    assert density("") == 0.0


def test_arabic_complex_words_raise_density() -> None:
    plain = "كان يا ما كان في قديم الزمان"
    complex_words = "الخوارزميات والمستخدمين والتطبيقات الحاسوبية"
    assert density(complex_words) > density(plain)


def test_dense_text_gets_smaller_chunks_than_prose() -> None:
    chunker = AdaptiveChunker(overlap=0)
    prose = chunker.chunk(PROSE * 20)
    code = chunker.chunk((CODE + "\n") * 30)
    assert max(c.metadata["target_size"] for c in code) < min(
        c.metadata["target_size"] for c in prose
    )

    def mean(chunks: list[Chunk]) -> float:
        return sum(len(c.text) for c in chunks) / len(chunks)

    # Each chunk ends near its target: content-defined cuts, not the greedy fill up to it.
    assert mean(code) < 0.8 * mean(prose)


def test_target_follows_local_density_prose_then_code() -> None:
    text = PROSE * 4 + "\n" + CODE * 6
    chunks = AdaptiveChunker(overlap=0).chunk(text)
    assert_all(text, chunks, CHARS, 1500)
    first, last = chunks[0], chunks[-1]
    assert first.metadata["local_density"] < last.metadata["local_density"]
    assert first.metadata["target_size"] > last.metadata["target_size"]
    assert not first.text.rstrip().endswith("```"), "prose chunk must end before the fence"
    assert {c.metadata["density"] for c in chunks} == {chunks[0].metadata["density"]}


def test_overlap_carries_trailing_whole_sentences() -> None:
    text = " ".join(f"Sentence number {i} is here." for i in range(60))
    chunks = AdaptiveChunker(min_size=100, max_size=200, overlap=60).chunk(text)
    assert len(chunks) > 3
    for before, after in itertools.pairwise(chunks):
        shared = before.end_index - after.start_index
        assert after.text.startswith("Sentence number")
        assert len(after.text) <= 200
        # A chunk of one sentence has no trailing sentence to give without giving all of it.
        if before.text.count(".") > 1:
            assert 0 < shared <= 60
        else:
            assert shared < 0
    assert sum(a.end_index > b.start_index for a, b in itertools.pairwise(chunks)) > len(chunks) / 2


def test_overlap_zero_gives_disjoint_chunks() -> None:
    text = PROSE * 6
    chunks = AdaptiveChunker(overlap=0).chunk(text)
    assert all(a.end_index <= b.start_index for a, b in itertools.pairwise(chunks))


def test_long_sentence_is_cut_at_words_under_max_size() -> None:
    text = "word " * 500
    chunks = AdaptiveChunker(min_size=50, max_size=120, overlap=0).chunk(text)
    assert_all(text, chunks, CHARS, 120)
    assert all(c.text.endswith("word") for c in chunks)


def test_arabic_clause_mark_cuts_before_words() -> None:
    clause = "هذه جملة طويلة جدا تتكرر، "
    text = clause * 20
    chunks = AdaptiveChunker(min_size=50, max_size=100, overlap=0).chunk(text)
    assert_all(text, chunks, CHARS, 100)
    assert all(c.text.endswith("،") for c in chunks[:-1])
    english = AdaptiveChunker(min_size=50, max_size=100, overlap=0, language="en").chunk(text)
    assert any(not c.text.endswith("،") for c in english[:-1])


def test_short_text_is_one_chunk_and_empty_is_none() -> None:
    chunker = AdaptiveChunker()
    assert chunker.chunk("") == []
    assert chunker.chunk(" \n ") == []
    chunks = chunker.chunk("  Tiny text.  ")
    assert [c.text for c in chunks] == ["Tiny text."]


def test_min_above_max_is_refused() -> None:
    with pytest.raises(ValueError, match="min_size"):
        AdaptiveChunker(min_size=2000, max_size=1500)
    with pytest.raises(registry.InvalidParameters, match="min_size"):
        registry.build("adaptive", {"min_size": 10, "max_size": 5})


def test_unset_sizes_resolve_in_the_unit() -> None:
    chunker = AdaptiveChunker(max_size=300, min_size=50, overlap=0)
    assert chunker.params.max_size == 300
    assert chunker.params.min_size == 50
    assert chunker.params.overlap == 0
    assert chunker.params.base_size == 512


def test_document_identity_and_metadata() -> None:
    chunker = AdaptiveChunker()
    chunks = chunker.chunk("First doc.", "a", "s") + chunker.chunk("Second doc.", "b")
    assert [(c.text, c.metadata.get("doc_id"), c.metadata.get("source")) for c in chunks] == [
        ("First doc.", "a", "s"),
        ("Second doc.", "b", None),
    ]
    meta = chunks[0].metadata
    assert set(meta) >= {"density", "local_density", "target_size", "technical", "chunk_index"}


def test_registered_as_rule_chunker() -> None:
    built = registry.build("adaptive", {"max_size": "400", "min_size": "50"})
    assert isinstance(built.chunker, RuleChunker)
    text = PROSE * 5
    chunks = built.chunker.chunk(text, content_type="text/markdown")
    assert_all(text, chunks, CHARS, 400)
    assert {c.strategy for c in chunks} == {"adaptive"}


@settings(max_examples=150, deadline=None)
@given(
    any_text,
    st.integers(min_value=1, max_value=60),
    st.integers(min_value=0, max_value=200),
    st.integers(min_value=0, max_value=40),
)
def test_adaptive_invariants(text: str, min_size: int, spread: int, overlap: int) -> None:
    chunker = AdaptiveChunker(
        base_size=64, min_size=min_size, max_size=min_size + spread, overlap=overlap
    )
    chunks = chunker.chunk(text)
    assert_all(text, chunks, CHARS, min_size + spread)
    assert chunker.chunk(text) == chunks
