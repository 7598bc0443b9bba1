"""Sizes in the retrieval model's tokens: the unit, the window, and the fingerprint."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.fake_embedder import TOKENIZER, embed, model_ref, topic_document, with_embedder
from tests.support.token_counters import make_counter
from tests.support.window_invariants import assert_contiguous, assert_windows
from worker.chunking import registry, strategies
from worker.chunking.semantic.context import ContextChunker
from worker.chunking.semantic.sdpm import SDPMChunker
from worker.chunking.semantic.semantic import SemanticChunker
from worker.chunking.semantic.sizing import (
    CHARACTERS,
    PieceMemory,
    Sizing,
    TokenizerUnit,
    load_unit,
)
from worker.chunking.text.tokens import CHARACTER, PIECE_CACHE_LIMIT, CharacterCounter
from worker.models.reference import ModelRef
from worker.pipeline import chunk_document_sync

STRATEGIES = ("semantic", "sdpm", "context")


def retrieval(window: int = 254, tokenizer: Path = TOKENIZER) -> ModelRef:
    """A retrieval model reference with the MiniLM tokenizer and ``window`` tokens of text."""
    ref = model_ref("retrieval-model", role="retrieval")
    return dataclasses.replace(ref, max_seq_length=window + 2, tokenizer=tokenizer)


def resolve_sizing(tokenizer: str | None, model: ModelRef | None) -> Sizing:
    """The embedding strategies' unit as the registry's factories resolve it."""
    return strategies.semantic_sizing(tokenizer, registry.BuildContext(retrieval=model))


def test_the_unit_follows_the_parameter_then_the_retrieval_model() -> None:
    assert resolve_sizing(None, None) is CHARACTERS
    sized = resolve_sizing(None, retrieval())
    assert isinstance(sized.counter, TokenizerUnit)
    assert sized.window == 254
    assert resolve_sizing("character", retrieval()) is CHARACTERS
    named = resolve_sizing(str(TOKENIZER), retrieval())
    assert isinstance(named.counter, TokenizerUnit)
    assert named.window is None
    with pytest.raises(ValueError, match="not found"):
        resolve_sizing("/no/such/tokenizer.json", None)


def test_one_resolution_for_the_rule_and_the_embedding_strategies() -> None:
    context = registry.BuildContext(retrieval=retrieval(window=100))
    for tokenizer in (None, str(TOKENIZER), "character"):
        unit = strategies.size_unit(tokenizer, context)
        rules, embedding = (
            strategies.sizing(tokenizer, context),
            resolve_sizing(tokenizer, context.retrieval),
        )
        assert rules.window == embedding.window == (None if unit is None else unit.window)
        assert (
            rules.unit == embedding.counter.unit == (CHARACTER if unit is None else unit.tokenizer)
        )


def test_a_model_directory_names_its_tokens_and_window(tmp_path: Path) -> None:
    static = Path(__file__).resolve().parents[3] / ".cache/models/all-MiniLM-L6-v2-static"
    if not (static / "manifest.json").is_file():
        pytest.fail(f"no static model at {static}: run scripts/bootstrap")
    sized = resolve_sizing(str(static), None)
    assert isinstance(sized.counter, TokenizerUnit)
    assert sized.window == 512
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "x").write_text("")
    with pytest.raises(ValueError, match="holds no model"):
        resolve_sizing(str(tmp_path / "empty"), None)


@pytest.mark.parametrize("name", STRATEGIES)
def test_sizes_count_the_retrieval_tokens_and_never_pass_its_window(name: str) -> None:
    text = topic_document(["cooking", "astronomy", "finance", "sailing"], 30)[0]
    context = registry.BuildContext(retrieval=retrieval(window=100))
    built = registry.build(name, {"chunk_size": "600"}, context)  # lowered to the window
    chunks = chunk_document_sync(built, text, "text/plain", embed)
    counter = make_counter(str(TOKENIZER))
    if name == "context":
        assert_windows(text, chunks, counter, 100)
    else:
        assert_contiguous(text, chunks, counter, 100)
    assert max(c.token_count for c in chunks) > 50  # tokens, not characters


@pytest.mark.parametrize("name", STRATEGIES)
def test_the_fingerprint_changes_with_the_sizing_tokenizer(name: str, tmp_path: Path) -> None:
    def fingerprint(ref: ModelRef | None, **params: str) -> str:
        return registry.build(name, params, registry.BuildContext(retrieval=ref)).fingerprint

    base = fingerprint(retrieval())
    assert fingerprint(retrieval()) == base
    assert fingerprint(None) != base  # characters
    assert fingerprint(retrieval(window=126)) != base  # another window
    copy = tmp_path / "tokenizer.json"
    shutil.copyfile(TOKENIZER, copy)
    assert fingerprint(retrieval(tokenizer=copy)) == base  # same tokenizer, other place
    changed = tmp_path / "changed" / "tokenizer.json"
    changed.parent.mkdir()
    changed.write_text(TOKENIZER.read_text().replace('"[UNK]"', '"[UNKNOWN]"'))
    assert fingerprint(retrieval(tokenizer=changed)) != base  # another tokenizer
    # A unit named in the parameters is in the fingerprint already; the model does not matter.
    assert fingerprint(retrieval(), tokenizer="character") == fingerprint(
        retrieval(window=126), tokenizer="character"
    )
    # Nor does a model's identity when it does not size: the rule is the tokenizer and window.
    other = dataclasses.replace(retrieval(), identity="another-model")
    assert fingerprint(other) == base


def test_counts_add_up_only_where_the_tokenizer_splits() -> None:
    unit = load_unit(str(TOKENIZER))
    assert unit.additive
    assert set(unit.glue) == {"\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x1f", "\x85"}
    assert unit.adds_up("plain text\nwith lines")
    assert not unit.adds_up("a\x1cb")  # dropped by the normaliser: "ab" is one word


@pytest.mark.parametrize("chunker_type", [SemanticChunker, SDPMChunker, ContextChunker])
def test_separators_the_tokenizer_drops_are_counted_exactly(chunker_type: type) -> None:
    words = topic_document(["cooking", "sailing"], 20)[0].split(" ")
    text = "\x1c".join(words)  # every word glued to the next once "\x1c" is dropped
    sizing = resolve_sizing(None, retrieval(window=60))
    chunker = with_embedder(chunker_type, embed, sizing=sizing)
    chunks = chunker.chunk(text)
    counter = make_counter(str(TOKENIZER))
    for chunk in chunks:
        assert chunk.token_count == counter.count(chunk.text)
        assert chunk.token_count <= 60


def test_minimum_and_default_sizes() -> None:
    plain = SemanticChunker()  # no retrieval model: characters
    assert (plain.bounds.cap, plain.bounds.minimum) == (1000, 125)
    sized = SemanticChunker(sizing=resolve_sizing(None, retrieval()))
    assert (sized.bounds.cap, sized.bounds.minimum) == (254, 31)
    assert isinstance(SemanticChunker().sizing.counter, CharacterCounter)
    with pytest.raises(ValueError, match="quarter"):
        SemanticChunker(chunk_size=100, min_chunk_size=30)
    context = ContextChunker(sizing=resolve_sizing(None, retrieval()))
    assert (context.cap, context.core.cap, context.core.minimum) == (254, 190, 31)


TEXT_CHARACTERS = st.sampled_from(
    [
        *list("abc xyz,.;:!?()'\"-\n\t"),
        "é",
        "ß",
        "日本",
        "😀",
        "\xa0",
        "\u2028",
        "\x0b",
        "\x1f",
        "\x85",
    ]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(TEXT_CHARACTERS, max_size=40).map("".join), min_size=1, max_size=12))
def test_remembered_pieces_count_what_the_tokenizer_counts(texts: list[str]) -> None:
    """Counts from the piece memory (sums over whitespace-separated pieces) equal the
    tokenizer's count of each whole text — cold, warm, and after the memory is replaced —
    with the characters BERT drops as controls (where counts do not add up) among them."""
    from tokenizers import Tokenizer

    whole = Tokenizer.from_file(str(TOKENIZER))
    whole.no_truncation()
    whole.no_padding()
    expected = [len(whole.encode(t, add_special_tokens=False).ids) for t in texts]
    unit = load_unit(str(TOKENIZER))
    unit._memory = PieceMemory()  # its own: the test fills it with made-up counts below
    assert list(unit.count_many(texts)) == expected  # cold
    assert list(unit.count_many(texts)) == expected  # every piece remembered
    assert [unit.count(t) for t in texts] == expected
    # Nearly full: the next call starts afresh, and must count the pieces it knew again.
    known = unit._memory.known
    unit._memory.known = {**known, **{str(n): 0 for n in range(PIECE_CACHE_LIMIT - len(known))}}
    assert list(unit.count_many([*texts, "brand-new-piece-xyz"]))[:-1] == expected
