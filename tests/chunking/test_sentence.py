from __future__ import annotations

import pytest

from tests.support.chunk_invariants import assert_all
from tests.support.token_counters import make_counter
from worker.chunking import registry
from worker.chunking.rules.sentence import SentenceChunker, SentenceParams
from worker.chunking.types import RuleChunker

TEXT = (
    "Chunking splits a document into pieces. Each piece should hold whole sentences. "
    "A sentence longer than the cap is cut at words. Pneumonoultramicroscopicsilicovolcanoconiosis "
    "is a long word.\n\nA new paragraph starts here. It ends here."
)


def test_registry_builds_a_rule_chunker() -> None:
    built = registry.build("sentence", {"chunk_size": "80"})
    assert built.needs_model is False
    assert isinstance(built.chunker, RuleChunker)
    chunks = built.chunker.chunk(TEXT, content_type="text/markdown")
    assert_all(TEXT, chunks, make_counter(), 80)
    assert [c.metadata["chunk_index"] for c in chunks] == list(range(len(chunks)))
    assert {c.strategy for c in chunks} == {"sentence"}


def test_whole_sentences_share_a_chunk_under_the_cap() -> None:
    chunks = SentenceChunker(SentenceParams(chunk_size=80)).chunk(TEXT)
    assert [c.text for c in chunks[:2]] == [
        "Chunking splits a document into pieces. Each piece should hold whole sentences.",
        "A sentence longer than the cap is cut at words.",
    ]


def test_over_long_sentence_is_cut_at_words_then_characters() -> None:
    chunks = SentenceChunker(SentenceParams(chunk_size=30)).chunk(TEXT)
    assert_all(TEXT, chunks, make_counter(), 30)
    assert "Pneumonoultramicroscopicsilico" in [c.text for c in chunks]


def test_whole_text_in_one_chunk_when_it_fits() -> None:
    chunks = SentenceChunker().chunk(TEXT)
    assert len(chunks) == 1
    assert chunks[0].text == TEXT.strip()


@pytest.mark.parametrize("text", ["", "  \n\t "])
def test_blank_text_gives_no_chunks(text: str) -> None:
    assert SentenceChunker().chunk(text) == []


def test_output_is_deterministic() -> None:
    chunker = registry.build("sentence", {"chunk_size": 40}).chunker
    assert isinstance(chunker, SentenceChunker)
    assert chunker.chunk(TEXT) == chunker.chunk(TEXT)


def test_token_unit(tokenizer_path: str) -> None:
    built = registry.build("sentence", {"chunk_size": 12, "tokenizer": tokenizer_path})
    assert isinstance(built.chunker, SentenceChunker)
    chunks = built.chunker.chunk(TEXT)
    assert_all(TEXT, chunks, make_counter(tokenizer_path), 12)
    assert any(c.token_count != len(c.text) for c in chunks)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"chunk_size": 0}, "chunk_size"),
        ({"chunk_size": "many"}, "chunk_size"),
        ({"size": 10}, "size"),
        ({"tokenizer": ""}, "tokenizer"),
        ({"tokenizer": "/missing/tokenizer.json"}, "tokenizer"),
    ],
)
def test_bad_parameters_are_refused_with_their_name(
    params: dict[str, object], message: str
) -> None:
    with pytest.raises(registry.InvalidParameters, match=message):
        registry.build("sentence", params)


def test_fingerprint_includes_defaults() -> None:
    # The default size is "the unit's default" (None): the model's window in tokens, 1000
    # characters; spelled out or left out, it is the same strategy.
    assert (
        registry.build("sentence").fingerprint
        == registry.build("sentence", {"chunk_size": None, "tokenizer": None}).fingerprint
    )
    assert (
        registry.build("sentence").fingerprint
        != registry.build("sentence", {"chunk_size": 999}).fingerprint
    )
