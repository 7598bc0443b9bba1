from __future__ import annotations

import pytest

from tests.support.token_counters import make_counter
from worker.chunking.text import tokens
from worker.chunking.text.tokens import CharacterCounter, TokenCounter


def test_character_is_the_default_unit() -> None:
    counter = make_counter()
    assert isinstance(counter, CharacterCounter)
    assert isinstance(counter, TokenCounter)
    assert counter.unit == "character"
    assert counter.count("") == 0
    assert counter.count("héllo 世界") == 8


def test_the_whole_text_reference_counts_without_special_tokens(tokenizer_path: str) -> None:
    counter = make_counter(tokenizer_path)  # the tests' reference (tests/support)
    assert counter.unit == tokenizer_path
    assert counter.count("") == 0
    # WordPiece splits "hello world" into two tokens; [CLS]/[SEP] must not be counted.
    assert counter.count("hello world") == 2
    assert counter.count("hello world " * 300) == 600, "counting must not truncate"


def test_a_tokenizer_is_loaded_once_per_path(tokenizer_path: str) -> None:
    first = tokens.PieceCounter(tokenizer_path)
    second = tokens.PieceCounter(str(tokenizer_path).replace("/", "//"))  # another spelling
    assert first._tokenizer is second._tokenizer
    assert len(tokens._TOKENIZERS) >= 1


@pytest.mark.parametrize("unit", ["", "/nonexistent/tokenizer.json"])
def test_bad_unit_is_refused(unit: str) -> None:
    with pytest.raises(ValueError, match="tokenizer"):
        tokens.PieceCounter(unit)


def test_unreadable_tokenizer_file_is_refused(tmp_path: object) -> None:
    from pathlib import Path

    bad = Path(str(tmp_path)) / "tokenizer.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="cannot load tokenizer"):
        tokens.PieceCounter(str(bad))


def test_the_piece_memory_starting_afresh_keeps_every_piece_of_the_call(
    tokenizer_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The memory is bounded: a call that takes it past the bound starts it afresh. The pieces
    of that call it already knew must be counted again, not lost (a KeyError on new text
    once the memory filled, found on 25 MB of Sphinx sources: docs/benchmarks.md)."""
    monkeypatch.setattr(tokens, "PIECE_CACHE_LIMIT", 4)
    counter = tokens.PieceCounter(tokenizer_path)
    whole = make_counter(tokenizer_path)
    assert counter.count_pieces(["alpha", "beta"]) == [1, 1]
    pieces = ["alpha", "gamma", "delta", "epsilon", "beta", "zeta"]
    assert counter.count_pieces(pieces) == [whole.count(p) for p in pieces]
    assert len(counter.known) <= len(pieces)


def test_the_piece_memory_is_safe_across_threads(
    tokenizer_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Documents are chunked on several threads with one counter per tokenizer. A call that
    starts the memory afresh must not take pieces away from a call running beside it (a
    KeyError, and the document dead-lettered as chunking_failed: found on 25 MB of Sphinx
    sources through the worker)."""
    import sys
    import threading

    monkeypatch.setattr(tokens, "PIECE_CACHE_LIMIT", 16)
    monkeypatch.setattr(sys, "getswitchinterval", sys.getswitchinterval)
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can
    try:
        counter = tokens.PieceCounter(tokenizer_path)
        whole = make_counter(tokenizer_path)
        words = [f"w{n}x{n * 7}" for n in range(200)]
        expected = {w: whole.count(w) for w in words}
        failures: list[BaseException] = []

        def hammer(offset: int) -> None:
            try:
                for round_ in range(300):
                    batch = words[(offset + round_) % 180 :][:12]
                    assert counter.count_pieces(batch) == [expected[w] for w in batch]
            except BaseException as exc:  # reported below, on the main thread
                failures.append(exc)

        threads = [threading.Thread(target=hammer, args=(k * 37,)) for k in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(0.005)
    assert not failures, failures[:3]
