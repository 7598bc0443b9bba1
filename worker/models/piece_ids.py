"""Token ids of texts put together from the remembered ids of their words.

A BERT-family tokenizer never lets a token cross whitespace: its ids for a text are the ids of the
text's whitespace-separated pieces, one piece after another. Words repeat from text to text, so
remembering each piece's ids turns most of a text's tokenization into dictionary lookups — the
static model's vectors are a table lookup, and tokenizing was most of their cost.

When the rule holds: a ``tokenizer.json`` whose pre-tokenizer is ``BertPreTokenizer`` (splits at
whitespace, isolates punctuation) after a per-character normaliser (``BertNormalizer`` or none),
and a text whose whitespace is only space, tab, line feed and carriage return. Python's
``str.split`` also splits at characters the BERT normaliser drops as controls (``\\x0b``,
``\\x1c``…), which would glue the words on both sides into one; a text with any whitespace but
those four is tokenized whole. ``tests/models/test_piece_ids.py`` holds the two ways equal on
generated texts (accents, CJK, punctuation, special tokens, every kind of whitespace).

Truncation (``max_length``) applies to the joined ids: the first ``max_length`` ids of the joined
pieces are the first ``max_length`` of the whole text even when a piece of more than
``max_length`` tokens was itself truncated.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray
from tokenizers import Tokenizer

from worker.wordpiece import AsciiWordPiece, WordPieceTables, take

# Pieces whose ids are remembered (the memory plan's reserve for a loaded model counts them:
# worker.runtime.resources). Past it the memory starts afresh: a bound on what a stream of
# ever-new words can hold.
PIECE_LIMIT = 1 << 15
# Texts tokenized per call of the tokenizer: its encodings of one call are held at once.
_SLICE = 1024
# Whitespace other than the four the BERT normaliser turns into a plain space.
_OTHER_WHITESPACE = re.compile(r"[^\S \t\n\r]")


def pieces_add_up(tokenizer: Tokenizer) -> bool:
    """Whether ``tokenizer``'s ids of a text are its whitespace pieces' ids joined (for texts
    whose only whitespace is space, tab, line feed and carriage return)."""
    config = json.loads(tokenizer.to_str())
    pre_tokenizer = config.get("pre_tokenizer") or {}
    normalizer = config.get("normalizer")
    return pre_tokenizer.get("type") == "BertPreTokenizer" and (
        normalizer is None or normalizer.get("type") == "BertNormalizer"
    )


class PieceIds:
    """Token ids (no special tokens) of texts, from a memory of pieces where the rule holds.

    Safe to call from several threads: the memory is replaced, never cleared, so a call keeps
    the dictionary it filled."""

    def __init__(
        self, tokenizer: Tokenizer, max_length: int | None, limit: int = PIECE_LIMIT
    ) -> None:
        self._tokenizer = tokenizer
        self._max_length = max_length
        self._limit = limit
        self._additive = pieces_add_up(tokenizer)
        # New ASCII words are tokenized without `tokenizers` (worker.wordpiece: the same ids).
        self._wordpiece = AsciiWordPiece.from_spec(json.loads(tokenizer.to_str()))
        self._known: dict[str, bytes] = {}  # piece -> its ids as int32 bytes

    @property
    def additive(self) -> bool:
        """Whether the rule holds for this tokenizer (else every text is tokenized whole)."""
        return self._additive

    def wordpiece_tables(self) -> WordPieceTables | None:
        """The tables of the compiled WordPiece path, or None when it cannot stand for this one."""
        return None if self._wordpiece is None else self._wordpiece.tables()

    def piece_ids(self, pieces: list[str]) -> list[bytes]:
        """Each piece's ids by the tokenizer, as int32 bytes (the compiled rows' fallback)."""
        out: list[bytes] = []
        for at in range(0, len(pieces), _SLICE):
            encodings = self._tokenizer.encode_batch_fast(
                pieces[at : at + _SLICE], add_special_tokens=False
            )
            out.extend(np.array(e.ids, dtype=np.int32).tobytes() for e in encodings)
        return out

    def ids(self, texts: Sequence[str]) -> list[NDArray[np.int64]]:
        """Each text's ids, in order; at most ``max_length`` of them."""
        found: list[NDArray[np.int64] | None] = [None] * len(texts)
        whole: list[int] = []
        split: list[tuple[int, list[str]]] = []
        for i, text in enumerate(texts):
            if not self._additive or _OTHER_WHITESPACE.search(text):
                whole.append(i)
            else:
                split.append((i, text.split()))
        if split:
            known = self._remember([pieces for _, pieces in split])
            limit = self._max_length
            for i, pieces in split:
                joined = np.frombuffer(b"".join([known[p] for p in pieces]), dtype=np.int32)
                found[i] = (joined if limit is None else joined[:limit]).astype(np.int64)
        for at in range(0, len(whole), _SLICE):
            indexes = whole[at : at + _SLICE]
            encodings = self._tokenizer.encode_batch_fast(
                [texts[i] for i in indexes], add_special_tokens=False
            )
            for i, encoding in zip(indexes, encodings, strict=True):
                found[i] = np.array(encoding.ids, dtype=np.int64)
        return [row for row in found if row is not None]

    def _remember(self, texts_pieces: list[list[str]]) -> dict[str, bytes]:
        """The memory, holding every piece of ``texts_pieces``."""
        known = self._known
        missing = {p for pieces in texts_pieces for p in pieces if p not in known}
        if not missing:
            return known
        if len(known) + len(missing) > self._limit:
            # Afresh, with every piece this call needs (the ones known so far included).
            known = self._known = {}
            missing = {p for pieces in texts_pieces for p in pieces}
        done, wanted = take(self._wordpiece, missing)
        for piece, ids in done:
            known[piece] = np.array(ids, dtype=np.int32).tobytes()
        for at in range(0, len(wanted), _SLICE):
            part = wanted[at : at + _SLICE]
            encodings = self._tokenizer.encode_batch_fast(part, add_special_tokens=False)
            for piece, encoding in zip(part, encodings, strict=True):
                known[piece] = np.array(encoding.ids, dtype=np.int32).tobytes()
        return known
