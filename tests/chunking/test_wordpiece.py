"""The Python WordPiece path (worker.wordpiece) gives exactly the ids of `tokenizers` for every
piece it takes, and takes only pieces it can: ASCII, no added token inside."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from tests.support.corpus import gather
from tests.support.wordpiece_cases import by_case, loaded, pieces, spec_of
from worker.wordpiece import AsciiWordPiece, take


def assert_same(path: AsciiWordPiece, tokenizer: Tokenizer, piece: str) -> None:
    ids = path.ids(piece)
    expected = tokenizer.encode(piece, add_special_tokens=False).ids
    if ids is None:  # declined: only pieces the module says it leaves alone
        assert not piece.isascii() or "[" in piece
    else:
        assert ids == expected, piece


@settings(max_examples=500, deadline=None)
@given(pieces, st.booleans())
@example("[CLS]x", True)
@example("x" * 101, True)
@example("antidisestablishmentarianism", False)
@example("\x00", True)
@example("a\x0bb", True)  # dropped, not a separator: one word "ab"
def test_the_same_ids_as_tokenizers(tokenizer_path: str, piece: str, lowercase: bool) -> None:
    assert_same(*by_case(tokenizer_path, lowercase), piece)


def test_the_same_ids_on_every_piece_of_the_corpus(tokenizer_path: str) -> None:
    docs = gather()
    assert len(docs) >= 50, "the corpus of installed package descriptions is missing"
    every = sorted({piece for doc in docs for piece in doc.text.split()})
    path, tokenizer = loaded(spec_of(tokenizer_path))
    done, left = take(path, every)
    assert len(done) > 0.95 * len(every)  # almost all of it is ASCII
    expected = tokenizer.encode_batch([piece for piece, _ in done], add_special_tokens=False)
    assert [ids for _, ids in done] == [e.ids for e in expected]
    assert all(path.ids(piece) is None for piece in left)


def test_other_tokenizers_are_not_taken(tokenizer_path: str) -> None:
    spec = spec_of(tokenizer_path)
    assert AsciiWordPiece.from_spec({**spec, "pre_tokenizer": {"type": "Whitespace"}}) is None
    assert AsciiWordPiece.from_spec(spec_of(tokenizer_path, clean_text=False)) is None
    assert AsciiWordPiece.from_spec({**spec, "normalizer": None}) is None
    # An added token matched after the normalizer: a control dropped inside "[C\x01LS]" still
    # makes it, which these rules (the raw piece only) would miss.
    normalized = [{**t, "normalized": True} for t in spec["added_tokens"]]
    assert AsciiWordPiece.from_spec({**spec, "added_tokens": normalized}) is None
    bpe = {**spec, "model": {**spec["model"], "type": "BPE"}}
    assert AsciiWordPiece.from_spec(bpe) is None
    assert take(None, ["a", "b"]) == ([], ["a", "b"])
