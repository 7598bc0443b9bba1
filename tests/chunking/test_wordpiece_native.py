"""The cores' compiled WordPiece path (_native/_wordpiece.h) counts exactly the tokens of the
Python path it transcribes (worker.wordpiece, itself held equal to `tokenizers` by
test_wordpiece.py), takes the same pieces, and is what the cores count their misses with."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.support.corpus import gather
from tests.support.wordpiece_cases import by_case, pieces, spec_of
from worker.chunking.text.tokens import NOT_SEPARATORS, piece_counter
from worker.wordpiece import AsciiWordPiece

CORES = ["_sentence_core", "_adaptive_core", "_lexical_core"]


def core_named(name: str) -> ModuleType:
    try:
        return importlib.import_module(f"worker.chunking._native.{name}")
    except ImportError:
        pytest.skip(f"{name} is not built")  # test_native.py fails CI when it is not


def python_counts(path: AsciiWordPiece, texts: list[str]) -> list[int | None]:
    return [None if ids is None else len(ids) for ids in map(path.ids, texts)]


def compiled_counts(core: ModuleType, path: AsciiWordPiece, texts: list[str]) -> list[Any]:
    tables = path.tables()
    assert tables is not None
    result: list[Any] = core.wordpiece_counts(core.new_cache(tables), texts)
    return result


@pytest.mark.parametrize("name", CORES)
@settings(max_examples=300, deadline=None)
@given(st.lists(pieces, min_size=1, max_size=8), st.booleans())
@example(["a\x0bb", "[CLS]x", "x" * 101, "\x00", "[mask]", "don't", "é"], True)
@example(["antidisestablishmentarianism", "HeLLo", "a" * 300 + "!"], False)
def test_the_same_counts_as_the_python_path(
    tokenizer_path: str, name: str, texts: list[str], lowercase: bool
) -> None:
    path, _ = by_case(tokenizer_path, lowercase)
    assert compiled_counts(core_named(name), path, texts) == python_counts(path, texts)


@settings(max_examples=300, deadline=None)
@given(st.lists(pieces, min_size=1, max_size=8), st.booleans())
@example(["a\x0bb", "[CLS]x", "x" * 101, "\x00", "[mask]", "don't", "é", "xyzzyq!"], True)
@example(["antidisestablishmentarianism", "HeLLo", "a" * 300 + "!"], False)
def test_the_same_ids_as_the_python_path(
    tokenizer_path: str, texts: list[str], lowercase: bool
) -> None:
    """The static model's rows (_static_rows.h) take their ids from the same path, collected:
    the same ids in the same order, the unknown token where a word has no entry."""
    path, _ = by_case(tokenizer_path, lowercase)
    core = core_named("_sentence_core")
    memory = core.new_id_memory(path.tables())
    assert core.wordpiece_ids(memory, texts) == [path.ids(t) for t in texts]


def test_the_same_counts_on_every_piece_of_the_corpus(tokenizer_path: str) -> None:
    docs = gather()
    assert len(docs) >= 50, "the corpus of installed package descriptions is missing"
    every = sorted({piece for doc in docs for piece in doc.text.split()})
    # and pieces the units make that str.split does not: joined across dropped controls
    pairs = zip(every[:200], every[200:400], strict=True)
    every += [f"{a}{c}{b}" for a, b in pairs for c in NOT_SEPARATORS]
    path, _ = by_case(tokenizer_path, True)
    expected = python_counts(path, every)
    assert sum(count is not None for count in expected) > 0.95 * len(every)
    assert compiled_counts(core_named("_sentence_core"), path, every) == expected


def test_a_non_ascii_added_token_keeps_the_compiled_path_out(tokenizer_path: str) -> None:
    spec = spec_of(tokenizer_path)
    # U+212A KELVIN SIGN matches "k" under Python's case folding; the C does not fold it.
    spec["added_tokens"] = [*spec["added_tokens"], {"id": 0, "content": "\u212a"}]
    path = AsciiWordPiece.from_spec(spec)
    assert path is not None
    assert path.tables() is None
    assert path.ids("kelvin") is None  # the Python path declines it: `tokenizers` decides


def test_the_cores_count_their_misses_with_it(tokenizer_path: str) -> None:
    """Chunking new words asks Python for no piece the compiled path takes."""
    from worker.chunking import _native
    from worker.chunking.rules import sentence

    core = _native.core(_native.SENTENCE_CORE)
    chunk = sentence.compiled()
    if chunk is None or core is None:
        pytest.skip("the sentence core is not built")  # test_native.py fails CI when it is not
    new_cache = core.new_cache
    counter = piece_counter(tokenizer_path)
    tables = counter.wordpiece_tables()
    asked: list[str] = []

    def count_pieces(missing: list[str]) -> list[int]:
        asked.extend(missing)
        return counter.count_pieces(missing)

    text = "Zyzzyva quokkas juxtapose fjords. Naïve café-goers x\x0by [CLS] enjoy it."
    chunks = chunk(text, 5, new_cache(tables), count_pieces, None)
    assert chunks
    assert sorted(asked) == ["Naïve", "[CLS]", "café-goers"]
    without = chunk(text, 5, new_cache(None), count_pieces, None)
    assert without is not None
    assert [(c.text, c.token_count) for c in without] == [(c.text, c.token_count) for c in chunks]
    assert "Zyzzyva" in asked  # without the path every new piece goes to Python
