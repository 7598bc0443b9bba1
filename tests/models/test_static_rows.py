"""The static model's rows summed in C (``_native/_static_rows.h``, what the worker's loader
hands a static model) give the vectors and token lengths of the Python path they transcribe
(``StaticEmbedder`` over ``PieceIds``, itself held equal to `tokenizers` and to model2vec by
test_piece_ids.py and test_static.py), bit for bit: on generated texts full of what could break
the pieces rule, with and without model2vec's vocabulary quantisation, truncation, the text cut
and normalisation, with a memory small enough to start afresh between calls; and on every
sentence of the package corpus with the shipped static model."""

from __future__ import annotations

import functools
import importlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from tests.support.corpus import gather
from tests.support.piece_texts import texts, tokenizer
from worker.chunking import _native
from worker.chunking.text.segment import split_sentences
from worker.inference.serving import compile_static
from worker.models.loading import load_backend
from worker.models.reference import find
from worker.models.static import StaticEmbedder, StaticModel


@pytest.fixture(scope="module", autouse=True)
def _core_built() -> None:
    try:
        importlib.import_module("worker.chunking._native._sentence_core")
    except ImportError:
        pytest.skip("the sentence core is not built")  # test_native.py fails CI when it is not
    if not _native.enabled():
        pytest.skip("the pure-Python twins are forced")


def model_of(
    whole: Tokenizer,
    max_length: int | None,
    max_chars: int | None,
    quantised: bool,
    normalize: bool,
) -> StaticModel:
    vocab = whole.get_vocab_size(with_added_tokens=True)
    rng = np.random.default_rng(7)
    rows = vocab // 5 if quantised else vocab
    return StaticModel(
        directory=Path("."),
        matrix=(rng.standard_normal((rows, 9)) * 40).astype(np.float32),
        mapping=rng.integers(0, rows, vocab).astype(np.int64) if quantised else None,
        weights=rng.uniform(0.01, 3, vocab).astype(np.float32) if quantised else None,
        tokenizer=whole,
        unk_id=whole.token_to_id("[UNK]"),
        normalize=normalize,
        max_length=max_length,
        max_chars=max_chars,
        identity="test",
    )


def pair(model: StaticModel, limit: int | None = None) -> tuple[StaticEmbedder, StaticEmbedder]:
    """(Python, compiled) embedders of one model."""
    compiled = StaticEmbedder(model)
    assert compiled.use_compiled(functools.partial(_native.static_sums, limit=limit))
    return StaticEmbedder(model), compiled


def assert_same(python: StaticEmbedder, compiled: StaticEmbedder, batch: list[str]) -> None:
    expected, expected_lengths = python.embed_measured(batch)
    got, lengths = compiled.embed_measured(batch)
    assert got.dtype == np.float32
    assert got.shape == expected.shape
    assert np.array_equal(got, expected)
    assert lengths == expected_lengths
    assert lengths == python.token_lengths(batch)


@pytest.mark.parametrize("quantised", [False, True])
@pytest.mark.parametrize(("max_length", "max_chars"), [(None, None), (7, None), (512, 40)])
@settings(max_examples=60, deadline=None)
@given(batches=st.lists(texts, min_size=1, max_size=3), normalize=st.booleans())
@example(
    batches=[["", "   ", "[UNK] \u2603 kafka", "a\u00a0b", "x\x0by", "word " * 40]], normalize=True
)
def test_the_same_vectors_and_lengths_as_the_python_path(
    source_dir: Path,
    quantised: bool,
    max_length: int | None,
    max_chars: int | None,
    batches: list[list[str]],
    normalize: bool,
) -> None:
    model = model_of(tokenizer(source_dir, max_length), max_length, max_chars, quantised, normalize)
    python, compiled = pair(model, limit=16)  # starts afresh between calls again and again
    for batch in batches:  # later batches find pieces the earlier ones remembered
        assert_same(python, compiled, batch)


def test_the_same_vectors_on_every_sentence_of_the_corpus() -> None:
    docs = gather()
    assert len(docs) >= 50, "the corpus of installed package descriptions is missing"
    sentences = [d.text[s.start : s.end] for d in docs for s in split_sentences(d.text)]
    python, compiled = pair(StaticEmbedder.load(find("boundary", None).directory).model)
    for at in range(0, len(sentences), 4096):  # twice: from the memory the second time
        assert_same(python, compiled, sentences[at : at + 4096])
        assert_same(python, compiled, sentences[at : at + 4096])


def test_the_worker_loader_hands_a_static_model_the_compiled_rows() -> None:
    backend = load_backend(find("boundary", None))
    assert isinstance(backend, StaticEmbedder)
    assert compile_static(backend)
    assert backend.compiled


def test_a_tokenizer_whose_ids_do_not_add_up_keeps_the_python_path(source_dir: Path) -> None:
    from tokenizers.pre_tokenizers import Metaspace

    other = tokenizer(source_dir, None)
    other.pre_tokenizer = Metaspace()
    embedder = StaticEmbedder(model_of(other, None, None, False, False))
    assert not embedder.use_compiled(_native.static_sums)
    assert not embedder.compiled


def test_bad_arrays_are_refused(source_dir: Path) -> None:
    model = model_of(tokenizer(source_dir, None), None, None, False, False)
    sums = _native.static_sums(
        None, lambda pieces: [b""] * len(pieces), model.matrix, None, None, None, None
    )
    assert sums is not None
    with pytest.raises(ValueError, match="out must be"):
        sums(["a b"], np.zeros((2, 9)))
    with pytest.raises(TypeError, match="out must be"):
        sums(["a b"], np.zeros((1, 9), dtype=np.float32))
    small = _native.static_sums(
        None, lambda pieces: [np.array([5], np.int32).tobytes()] * len(pieces),
        model.matrix[:3], None, None, None, None,
    )  # fmt: skip
    assert small is not None
    with pytest.raises(ValueError, match="outside the model"):
        small(["a"], np.zeros((1, 9)))
