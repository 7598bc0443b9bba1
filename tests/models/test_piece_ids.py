"""Token ids put together from remembered pieces equal the real tokenizer's ids of the whole text
(the MiniLM ``tokenizer.json``: BERT normaliser and pre-tokenizer), with and without truncation,
on generated texts full of what could break the rule: every kind of whitespace Python splits
at, accents and combining marks, CJK, punctuation, special tokens written in the text, words
longer than WordPiece reads, and a memory small enough to be replaced within one call."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.piece_texts import texts, tokenizer
from worker.models.piece_ids import PieceIds, pieces_add_up


@pytest.mark.parametrize("max_length", [None, 7])
@settings(max_examples=150, deadline=None)
@given(batches=st.lists(texts, min_size=1, max_size=3))
def test_joined_piece_ids_are_the_whole_texts_ids(
    source_dir: Path, max_length: int | None, batches: list[list[str]]
) -> None:
    whole = tokenizer(source_dir, max_length)
    assert pieces_add_up(whole)
    memory = PieceIds(whole, max_length, limit=16)  # replaced again and again
    for batch in batches:  # later batches find pieces the earlier ones remembered
        expected = [e.ids for e in whole.encode_batch(batch, add_special_tokens=False)]
        assert [row.tolist() for row in memory.ids(batch)] == expected


def test_a_tokenizer_without_the_bert_pre_tokenizer_is_tokenized_whole(source_dir: Path) -> None:
    from tokenizers.pre_tokenizers import Metaspace

    other = tokenizer(source_dir, None)
    other.pre_tokenizer = Metaspace()  # a piece's ids would depend on what precedes it
    assert not pieces_add_up(other)
    text = "kafka partitions rebalance"
    memory = PieceIds(other, None)
    expected = other.encode(text, add_special_tokens=False).ids
    assert memory.ids([text])[0].tolist() == expected
    assert memory.ids([text])[0].dtype == np.int64
