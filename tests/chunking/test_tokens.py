from __future__ import annotations

import pytest

from worker.chunking.text import tokens
from worker.chunking.text.tokens import CharacterCounter, TokenCounter, make_counter


def test_character_is_the_default_unit() -> None:
    counter = make_counter()
    assert isinstance(counter, CharacterCounter)
    assert isinstance(counter, TokenCounter)
    assert counter.unit == "character"
    assert counter.count("") == 0
    assert counter.count("héllo 世界") == 8


def test_tokenizer_counts_without_special_tokens(tokenizer_path: str) -> None:
    counter = make_counter(tokenizer_path)
    assert counter.unit == tokenizer_path
    assert counter.count("") == 0
    # WordPiece splits "hello world" into two tokens; [CLS]/[SEP] must not be counted.
    assert counter.count("hello world") == 2
    assert counter.count("hello world " * 300) == 600, "counting must not truncate"


def test_tokenizer_is_loaded_once_per_path(tokenizer_path: str) -> None:
    first = make_counter(tokenizer_path)
    second = make_counter(tokenizer_path)
    assert first._tokenizer is second._tokenizer  # type: ignore[attr-defined]
    assert len(tokens._TOKENIZERS) >= 1


@pytest.mark.parametrize("unit", ["", "/nonexistent/tokenizer.json"])
def test_bad_unit_is_refused(unit: str) -> None:
    with pytest.raises(ValueError, match="tokenizer"):
        make_counter(unit)


def test_unreadable_tokenizer_file_is_refused(tmp_path: object) -> None:
    from pathlib import Path

    bad = Path(str(tmp_path)) / "tokenizer.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="cannot load tokenizer"):
        make_counter(str(bad))


def test_the_piece_memory_starting_afresh_keeps_every_piece_of_the_call(
    tokenizer_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The memory is bounded: a call that takes it past the bound starts it afresh. The pieces
    of that call it already knew must be counted again, not lost (a KeyError on new text
    once the memory filled, found on 25 MB of Sphinx sources: docs/worker.md)."""
    monkeypatch.setattr(tokens, "PIECE_CACHE_LIMIT", 4)
    counter = tokens.PieceCounter(tokenizer_path)
    whole = make_counter(tokenizer_path)
    assert counter.count_pieces(["alpha", "beta"]) == [1, 1]
    pieces = ["alpha", "gamma", "delta", "epsilon", "beta", "zeta"]
    assert counter.count_pieces(pieces) == [whole.count(p) for p in pieces]
    assert len(counter.known) <= len(pieces)
