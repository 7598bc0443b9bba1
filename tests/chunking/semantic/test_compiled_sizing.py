"""The embedding strategies' sizing counted through the rule cores' piece memory
(``count_texts`` in ``_native/_units.h``, wired by ``worker.chunking.strategies``) gives the
counts the tokenizer gives, and so the chunks the Python sizing gives."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from tests.support.corpus import gather
from tests.support.embedding import embed_batch
from worker.chunking import _native, registry
from worker.chunking.semantic.sizing import load_unit
from worker.chunking.text.segment import split_sentences
from worker.chunking.text.tokens import piece_counter
from worker.chunking.types import EmbeddingChunker

pytestmark = pytest.mark.skipif(
    _native.core(_native.SENTENCE_CORE) is None,
    reason="the sentence core is not built (test_native.py fails CI when it is not)",
)

STATIC_DIR = Path(__file__).resolve().parents[3] / ".cache" / "models" / "all-MiniLM-L6-v2-static"

# Words old and new, ASCII and not, punctuation of both kinds, added tokens, and whitespace of
# every kind str.split knows, the controls BERT drops among them.
_WORDS = ["the", "Zyzzyva", "quokka's", "café", "naïve—ok", "“quoted”", "[CLS]", "x" * 120]
_SPACES = [" ", "\t", "\n", "\u3000", "\xa0", "\u2028", "\x0b", "\x1c", "\x85"]
texts = st.lists(
    st.one_of(
        st.sampled_from(_WORDS),
        st.sampled_from(_SPACES),
        st.text(min_size=1, max_size=12),
    ),
    max_size=25,
).map("".join)


def tokens_of(tokenizer: Tokenizer, text: str) -> int:
    return len(tokenizer.encode(text, add_special_tokens=False).ids)


@settings(max_examples=300, deadline=None)
@given(st.lists(texts, min_size=1, max_size=6))
@example(["", " ", "a\x0bb c", "Zyzzyva quokkas", "“x” — y"])
@example(["ab" * 3000 + " end", "ab" * 3000])  # a piece too long to be remembered, twice
def test_count_texts_sums_the_tokens_of_the_split_pieces(
    tokenizer_path: str, batch: list[str]
) -> None:
    """The definition, independently: each piece tokenized on its own, the counts summed."""
    counts = _native.text_counts(piece_counter(tokenizer_path))
    assert counts is not None
    tokenizer = Tokenizer.from_file(tokenizer_path)
    tokenizer.no_padding()  # the bundled file pads and truncates to the model's input
    tokenizer.no_truncation()
    expected = [sum(tokens_of(tokenizer, piece) for piece in text.split()) for text in batch]
    assert counts(batch) == expected


def count_many(path: str, texts: list[str], *, compiled: bool) -> list[int]:
    """``TokenizerUnit.count_many``, its compiled counts on or off (the seam's switch)."""
    unit = load_unit(path)
    with pytest.MonkeyPatch.context() as patch:
        if not compiled:
            patch.setenv(_native.PURE_PYTHON_ENV, "1")
        assert (unit._compiled_counts() is not None) == compiled
        counted: list[int] = unit.count_many(texts).tolist()
        return counted


@settings(max_examples=200, deadline=None)
@given(st.lists(texts, min_size=1, max_size=6))
def test_count_many_is_the_same_compiled_or_not(tokenizer_path: str, batch: list[str]) -> None:
    """Glued texts (a control BERT drops between words) still go to the tokenizer whole."""
    compiled = count_many(tokenizer_path, batch, compiled=True)
    assert compiled == count_many(tokenizer_path, batch, compiled=False)


def test_count_many_is_the_same_on_the_corpus_sentences(tokenizer_path: str) -> None:
    docs = gather()
    assert len(docs) >= 50, "the corpus of installed package descriptions is missing"
    sentences = [doc.text[s.start : s.end] for doc in docs for s in split_sentences(doc.text)]
    compiled = count_many(tokenizer_path, sentences, compiled=True)
    assert compiled == count_many(tokenizer_path, sentences, compiled=False)


def built(name: str, *, compiled: bool, monkeypatch: pytest.MonkeyPatch) -> registry.BuiltStrategy:
    from worker.models.reference import describe

    if not (STATIC_DIR / "manifest.json").is_file():
        pytest.fail(f"no static model at {STATIC_DIR}: run scripts/bootstrap")
    if not compiled:
        monkeypatch.setenv(_native.PURE_PYTHON_ENV, "1")
    transformer = STATIC_DIR.parent / "all-MiniLM-L6-v2"
    context = registry.BuildContext(
        boundary=describe(STATIC_DIR, "boundary"), retrieval=describe(transformer, "retrieval")
    )
    strategy = registry.build(name, {}, context)
    chunker = strategy.chunker
    assert isinstance(chunker, EmbeddingChunker)
    wired = [chunker.sizing.counter, chunker.window.counter]  # type: ignore[attr-defined]
    assert all((unit._compiled_counts() is not None) == compiled for unit in wired)
    return strategy


@pytest.mark.parametrize("name", ["semantic", "sdpm", "context"])
def test_the_embedding_strategies_cut_the_same_chunks(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from worker.models.loading import load_backend
    from worker.models.reference import describe

    backend = load_backend(describe(STATIC_DIR, "boundary"))
    docs = sorted(gather(), key=lambda d: len(d.text))[-12:]  # the longest: sizes matter most
    results = []
    for compiled in (True, False):
        chunker = built(name, compiled=compiled, monkeypatch=monkeypatch).chunker
        assert isinstance(chunker, EmbeddingChunker)
        chunks = []
        for doc in docs:
            plan = chunker.plan(doc.text)
            chunks.append(chunker.assemble(plan, embed_batch(backend, list(plan.texts))))
        results.append(chunks)
    assert results[0] == results[1]
    assert sum(map(len, results[0])) > 12


def test_a_long_text_with_glue_is_counted_whole(tokenizer_path: str) -> None:
    """Long texts are searched for glue character by character, not by the pattern: a control
    BERT drops between two words deep inside one still makes it go to the tokenizer whole."""
    tokenizer = Tokenizer.from_file(tokenizer_path)
    tokenizer.no_padding()
    tokenizer.no_truncation()
    unit = load_unit(tokenizer_path)
    assert unit.glue, "the MiniLM tokenizer has glue (the controls Python calls whitespace)"
    for compiled in (True, False):
        with pytest.MonkeyPatch.context() as patch:
            if not compiled:
                patch.setenv(_native.PURE_PYTHON_ENV, "1")
            assert (unit._compiled_counts() is not None) == compiled
            for glue in sorted(unit.glue):
                text = "word " * 100 + f"quo{glue}kka" + " word" * 100
                assert not unit.adds_up(text)
                assert unit.count(text) == tokens_of(tokenizer, text)
                assert unit.count_many([text, "plain words"]).tolist() == [
                    tokens_of(tokenizer, text),
                    tokens_of(tokenizer, "plain words"),
                ]
