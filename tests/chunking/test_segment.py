from __future__ import annotations

import base64
from collections.abc import Callable

import pytest

from tests.support.chunk_invariants import assert_spans_exact
from tests.support.token_counters import make_counter
from worker.chunking.text import segment
from worker.chunking.text.segment import (
    pack_spans,
    split_sentences,
    split_to_cap,
    split_words,
)
from worker.chunking.text.word_cuts import longest_prefix_within
from worker.chunking.types import Span


def sentences(text: str, **kwargs: bool) -> list[str]:
    spans = split_sentences(text, **kwargs)
    assert_spans_exact(text, spans)
    return [text[s.start : s.end] for s in spans]


def test_latin_terminators() -> None:
    assert sentences("One. Two! Three? Four… Five") == ["One.", "Two!", "Three?", "Four…", "Five"]


def test_closing_quotes_and_brackets_stay_with_their_sentence() -> None:
    assert sentences('He left. "Fine." (Yes.) Next') == ["He left.", '"Fine."', "(Yes.)", "Next"]


@pytest.mark.parametrize(
    "text",
    [
        "Use it, e.g. for tests, i.e. always.",
        "Dr. Smith met Mr. Jones at St. Paul.",
        "Made in the U.S. Navy yards.",
        "Pi is about 3.14 and e is 2.718 here.",
        "Upgrade to v1.2.3 or 2.0.1 today.",
        "See https://example.com/a.b?c=d&e=f.g for details.",
        "Write to first.last@example.co.uk with questions.",
        'She said "wait… I know… Maybe" and left.',
        "J. R. R. Tolkien wrote it.",
        "Really? she asked, and went on.",
    ],
)
def test_no_split_inside(text: str) -> None:
    assert sentences(text) == [text]


def test_sentence_after_url_and_email_still_splits() -> None:
    assert sentences("Go to https://example.com. Then mail a@b.org. Done.") == [
        "Go to https://example.com.",
        "Then mail a@b.org.",
        "Done.",
    ]


def test_ellipsis_outside_quotes_splits() -> None:
    assert sentences("He waited... Nobody came.") == ["He waited...", "Nobody came."]


def test_arabic_terminators() -> None:
    text = "هل أنت بخير؟ نعم، أنا بخير۔ شكرا؛ مع السلامة"
    assert sentences(text) == ["هل أنت بخير؟", "نعم، أنا بخير۔", "شكرا؛", "مع السلامة"]


def test_arabic_comma_only_splits_clauses_on_request() -> None:
    text = "نعم، أنا بخير"
    assert sentences(text) == [text]
    assert sentences(text, clauses=True) == ["نعم،", "أنا بخير"]


def test_cjk_terminators_need_no_space() -> None:
    assert sentences("你好。我很好！你呢？「好。」再见") == [
        "你好。",
        "我很好！",
        "你呢？",
        "「好。」",
        "再见",
    ]


def test_newlines_end_sentences_and_whitespace_is_dropped() -> None:
    text = "  first line\r\nsecond line\rthird\n\n\t fourth  "
    assert sentences(text) == ["first line", "second line", "third", "fourth"]


def test_list_numbers_at_line_start_do_not_end_sentences() -> None:
    assert sentences("1. Install it.\n2. Run it.") == ["1. Install it.", "2. Run it."]


@pytest.mark.parametrize("text", ["", "   ", "\n\r\n\t"])
def test_blank_text_has_no_sentences(text: str) -> None:
    assert split_sentences(text) == []


def test_split_words() -> None:
    text = "  alpha  beta\tgamma\n"
    assert [text[s.start : s.end] for s in split_words(text, Span(0, len(text)))] == [
        "alpha",
        "beta",
        "gamma",
    ]


def test_split_to_cap_keeps_a_fitting_span() -> None:
    text = "short enough"
    span = Span(0, len(text))
    assert split_to_cap(text, span, make_counter(), 12) == [span]


def test_split_to_cap_cuts_at_words_then_characters() -> None:
    text = "alpha beta gamma abcdefghijklmnop delta"
    pieces = split_to_cap(text, Span(0, len(text)), make_counter(), 10)
    assert [text[p.start : p.end] for p in pieces] == [
        "alpha beta",
        "gamma",
        "abcdefghij",
        "klmnop",
        "delta",
    ]


def test_split_to_cap_refuses_a_zero_cap() -> None:
    with pytest.raises(ValueError, match="cap"):
        split_to_cap("x", Span(0, 1), make_counter(), 0)


def test_pack_spans_joins_neighbours_up_to_the_cap() -> None:
    text = "aa bb cc dd"
    spans = split_words(text, Span(0, len(text)))
    assert pack_spans(text, spans, make_counter(), 5) == [Span(0, 5), Span(6, 11)]


def test_split_to_cap_in_tokens(tokenizer_path: str) -> None:
    counter = make_counter(tokenizer_path)
    text = "the quick brown fox jumps over the lazy dog " * 5 + "x" * 300
    pieces = split_to_cap(text, Span(0, len(text.rstrip())), counter, 7)
    assert_spans_exact(text, pieces)
    assert all(counter.count(text[p.start : p.end]) <= 7 for p in pieces)
    assert len(pieces) > 5


def _probing(
    tokens_of: Callable[[str], int], text: str
) -> tuple[Callable[[int, int], int], list[int]]:
    """A count over ``text`` that records the length of every prefix it was asked about."""
    probed: list[int] = []

    def count(start: int, end: int) -> int:
        probed.append(end - start)
        return tokens_of(text[start:end])

    return count, probed


@pytest.mark.parametrize("chars_per_token", [1, 2, 3, 7])
@pytest.mark.parametrize("cap", [1, 4, 10, 254])
def test_the_longest_prefix_within_the_cap_is_found(chars_per_token: int, cap: int) -> None:
    # A monotonic count: the answer is known exactly (the search may not stop short of it).
    text = "a" * 5_000
    count, _ = _probing(lambda piece: -(-len(piece) // chars_per_token), text)
    assert longest_prefix_within(count, 0, len(text), cap) == min(len(text), cap * chars_per_token)
    assert longest_prefix_within(count, 4_990, len(text), cap) == min(10, cap * chars_per_token)


def test_a_single_character_over_the_cap_is_a_piece_of_its_own() -> None:
    count, _ = _probing(lambda piece: 4 * len(piece), "🙂🙂🙂")  # four byte-level tokens each
    assert longest_prefix_within(count, 0, 3, 2) == 1


class _RecordingCounter:
    """Two characters per token; remembers the length of every text it counted."""

    def __init__(self) -> None:
        self.counted: list[int] = []

    def count(self, text: str) -> int:
        self.counted.append(len(text))
        return -(-len(text) // 2)


@pytest.mark.parametrize("length", [10_000, 100_000])
def test_splitting_a_long_word_tokenizes_a_bounded_share_of_it(length: int) -> None:
    # The search used to bisect over the whole rest of the word for every piece: its counts
    # summed to ~log(n) * n / 2 characters per piece, quadratic in the word (650x the word at
    # 10,000 characters). Now each piece costs a few times its own length.
    text = "b" * length
    counter = _RecordingCounter()
    pieces = segment._split_characters(text, Span(0, length), counter, 50)  # type: ignore[arg-type]
    assert_spans_exact(text, pieces)
    assert all(p.end - p.start == 100 for p in pieces[:-1])
    assert sum(counter.counted) <= 20 * length, sum(counter.counted)


def test_a_base64_run_is_cut_in_linear_work_on_the_real_tokenizer(tokenizer_path: str) -> None:
    # An inline image: one whitespace-free run of 20,000 characters, ~1.6 MiniLM tokens each.
    counter = make_counter(tokenizer_path)
    text = base64.b64encode(bytes(range(256)) * 59).decode()[:20_000]
    counted: list[int] = []
    count = counter.count

    def recording(piece: str) -> int:
        counted.append(len(piece))
        return count(piece)

    counter.count = recording  # type: ignore[method-assign, assignment]
    pieces = split_to_cap(text, Span(0, len(text)), counter, 254)
    assert_spans_exact(text, pieces)
    assert all(count(text[p.start : p.end]) <= 254 for p in pieces)
    assert len(pieces) > 40
    assert sum(counted) <= 20 * len(text), sum(counted)
