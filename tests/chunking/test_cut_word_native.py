"""A token piece over the cap is cut by the compiled cores themselves, with the twin's own
``word_cuts.cut_word``, and the chunks are the twin's.

Before, a core that met such a piece (a base64 blob, a long URL, a run of one character)
returned None and the whole document went to the Python twin: 1 % of the bytes of Debian's
documentation and a fifth of `adaptive`'s and `lexical`'s chunking CPU (docs/benchmarks.md). Now
each core calls ``cut_word`` for the piece, refines its measure with the exact counts, and
goes on. Every test here checks both that the core handled the document itself (the twin was
not called) and that its chunks equal the twin's.
"""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from worker.chunking import _native
from worker.chunking.rules import adaptive, lexical, sentence
from worker.chunking.rules.adaptive import AdaptiveChunker
from worker.chunking.rules.lexical import LexicalChunker, LexicalParams
from worker.chunking.rules.sentence import SentenceChunker, SentenceParams
from worker.chunking.rules.sizing import Sizing
from worker.chunking.text.tokens import PieceCounter, piece_counter
from worker.chunking.text.units import word_cutter
from worker.chunking.text.word_cuts import cut_word
from worker.chunking.types import Chunk, ContentType

pytestmark = pytest.mark.skipif(
    None in (adaptive.compiled(), lexical.compiled(), sentence.compiled()),
    reason="compiled cores not built (tests/chunking/test_native.py fails when they must be)",
)

# Whitespace-free runs a tokenizer cuts into many tokens, or collapses into one unknown token
# (counts are not monotonic in the prefix), with words around them.
LONG_RUNS = [
    "ab-" * 40,
    "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0MTIzNDU2Nzg5Ky8=" * 6,
    "https://example.org/a/very/long/path/" + "segment-" * 30 + "?q=1&r=2",
    "ü" * 300,
    "x" * 700,
    "日本語の文章" * 40,
    "αβγδε" * 60,
    "a\x0bb" * 50,
    "🙂" * 40,
]
WORDS = ["The", "cat", "sat.", "It", "was", "fine,", "then", "left!", "\n\n", "\n", "# Title\n"]
documents = st.lists(
    st.one_of(st.sampled_from(WORDS), st.sampled_from(WORDS), st.sampled_from(LONG_RUNS)),
    min_size=1,
    max_size=60,
).map(" ".join)
CONTENT_TYPES: list[ContentType] = ["text/plain", "text/markdown"]
CHECKS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def counter(tokenizer_path: str) -> PieceCounter:
    return piece_counter(tokenizer_path)


def _core_only(monkeypatch: pytest.MonkeyPatch, chunker_type: type) -> list[int]:
    """Counts calls of the twin through ``chunk``: the core should need none."""
    calls: list[int] = []
    original = getattr(chunker_type, "chunk_reference")  # noqa: B009 - any chunker with a twin

    def counted(self: object, *args: object, **kwargs: object) -> list[Chunk]:
        calls.append(1)
        result: list[Chunk] = original(self, *args, **kwargs)
        return result

    monkeypatch.setattr(chunker_type, "chunk_reference", counted)
    return calls


@CHECKS
@given(text=documents, size=st.sampled_from([4, 16, 64, 254]))
def test_sentence_cuts_long_pieces_itself(counter: PieceCounter, text: str, size: int) -> None:
    chunker = SentenceChunker(SentenceParams(chunk_size=size), Sizing(counter))
    memory = _native.piece_memory(counter)
    core = sentence.compiled()
    assert core is not None
    native = core(text, chunker.sizes.cap, memory, counter.count_pieces, word_cutter(counter))
    assert native is not None
    assert native == chunker.chunk_reference(text)


@CHECKS
@given(text=documents, size=st.sampled_from([8, 40, 254]))
def test_adaptive_cuts_long_pieces_itself(counter: PieceCounter, text: str, size: int) -> None:
    chunker = AdaptiveChunker(
        base_size=size, min_size=max(1, size // 4), max_size=size * 2, sizing=Sizing(counter)
    )
    with pytest.MonkeyPatch.context() as patch:
        calls = _core_only(patch, AdaptiveChunker)
        native = chunker.chunk(text)
    assert not calls
    assert native == chunker.chunk_reference(text)


@CHECKS
@given(
    text=documents,
    size=st.sampled_from([8, 40, 254]),
    content_type=st.sampled_from(CONTENT_TYPES),
)
def test_lexical_cuts_long_pieces_itself(
    counter: PieceCounter, text: str, size: int, content_type: ContentType
) -> None:
    chunker = LexicalChunker(LexicalParams(chunk_size=size), Sizing(counter))
    with pytest.MonkeyPatch.context() as patch:
        calls = _core_only(patch, LexicalChunker)
        native = chunker.chunk(text, "doc", "src", content_type=content_type)
    assert not calls
    assert native == chunker.chunk_reference(text, "doc", "src", content_type=content_type)


def test_the_cores_decline_without_a_cutter(counter: PieceCounter) -> None:
    """Without ``cut_word`` (an older caller) a core returns None, as before, and the twin
    chunks the document."""
    text = f"A short sentence. {'ab-' * 30} and more."
    memory = _native.piece_memory(counter)
    core = sentence.compiled()
    assert core is not None
    assert core(text, 8, memory, counter.count_pieces, None) is None
    assert core(text, 8, memory, counter.count_pieces, word_cutter(counter))


def test_cut_word_is_the_search_the_twin_did(counter: PieceCounter) -> None:
    """The pieces cover the word in order, each with its exact count, none over the cap."""
    text = "see " + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=" * 8 + " end"
    start, end = 4, len(text) - 4
    cuts = cut_word(counter.count_exact, text, start, end, 10)
    assert cuts[0][0] == start
    assert cuts[-1][1] == end
    assert all(left[1] == right[0] for left, right in pairwise(cuts))
    for a, b, count in cuts:
        assert count == counter.count_exact(text[a:b]) <= 10
    assert len(cuts) > 1


def test_a_bad_cutter_is_an_error_not_wrong_chunks(counter: PieceCounter) -> None:
    text = f"Words first. {'ab-' * 30} and more."
    memory = _native.piece_memory(counter)
    core = sentence.compiled()
    assert core is not None

    def gap(text: str, start: int, end: int, cap: int) -> list[tuple[int, int, int]]:
        return [(start, start + 1, 1), (start + 2, end, 1)]  # leaves a character out

    def failing(text: str, start: int, end: int, cap: int) -> list[tuple[int, int, int]]:
        raise RuntimeError("tokenizer gone")

    with pytest.raises(ValueError, match="cut_word"):
        core(text, 8, memory, counter.count_pieces, gap)
    with pytest.raises(RuntimeError, match="tokenizer gone"):
        core(text, 8, memory, counter.count_pieces, failing)
    with pytest.raises(TypeError, match="cut_word"):
        core(text, 8, memory, counter.count_pieces, 42)  # type: ignore[arg-type]
