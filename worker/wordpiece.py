"""Token ids of ASCII pieces for BERT-family WordPiece tokenizers, worked out in Python.

Why: every word the worker has not seen before is tokenized to size chunks (and, for the
static model, to embed them). On text read once that is one piece in ten. `tokenizers` costs
enough CPU per new piece to be most of `adaptive`'s time on such text; this path costs several
times less for the same ids (bench/chunking_bench.py; docs/benchmarks.md).

When it applies: a ``tokenizer.json`` whose normalizer is ``BertNormalizer`` with
``clean_text``, whose pre-tokenizer is ``BertPreTokenizer`` and whose model is ``WordPiece``
(:meth:`AsciiWordPiece.from_spec` says None otherwise), and a piece — a whitespace-free run of
text, as ``str.split`` gives — that is ASCII and holds none of the added tokens (``[CLS]``,
``[MASK]``…, in any case: `tokenizers` matches those before anything else, in the raw text, so a
tokenizer with a ``normalized`` added token is not taken). Any other piece
is the caller's to send to `tokenizers`.

The rules, for such a piece (each is BERT's, restricted to ASCII):

- the normalizer lowercases it (when ``lowercase``) and drops control characters; accents and
  CJK handling do not touch ASCII;
- the pre-tokenizer splits it into runs of letters and digits and single punctuation
  characters (BERT counts every printable ASCII character that is neither as punctuation);
- WordPiece takes the longest vocabulary entry at the start of each word, then the longest
  continuation (``##`` entry) after it, and so on; a word longer than
  ``max_input_chars_per_word``, or one where no entry matches, is one unknown token.

``tests/chunking/test_wordpiece.py`` holds the ids equal to `tokenizers`' on generated pieces
and on the corpus.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

_WORDS = re.compile(r"[A-Za-z0-9]+|[!-/:-@\[-`{-~]")
# Every ASCII control but the three the normalizer reads as whitespace (\t, \n, \r): \x0b and
# \x0c are whitespace to str.split but controls to BERT, and the units' pieces hold them
# (tokens.NOT_SEPARATORS), so they are dropped, joining the text on both sides.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class WordPieceTables(NamedTuple):
    """What the compiled cores' WordPiece path (``_native/_wordpiece.h``) is built from."""

    first: list[str]
    """Vocabulary entries, as a word's first piece matches them."""
    first_ids: list[int]
    """Their ids, in the same order."""
    continuations: list[str]
    """Continuation entries without their prefix (``##ing`` as ``ing``)."""
    continuation_ids: list[int]
    """Their ids, in the same order."""
    unknown: int
    """The unknown token's id."""
    max_word_chars: int
    lowercase: bool
    added: list[str]


class AsciiWordPiece:
    """WordPiece ids of ASCII pieces (see the module)."""

    def __init__(
        self,
        vocab: Mapping[str, int],
        *,
        unknown: str,
        prefix: str,
        max_word_chars: int,
        lowercase: bool,
        added: list[str],
    ) -> None:
        self._first = dict(vocab)
        self._next = {t[len(prefix) :]: i for t, i in vocab.items() if t.startswith(prefix)}
        self._unknown = vocab[unknown]
        self._max_word_chars = max_word_chars
        self._lowercase = lowercase
        self._longest = max(map(len, vocab))
        self._added = (
            re.compile("|".join(re.escape(a) for a in added), re.IGNORECASE) if added else None
        )
        self._added_tokens = list(added)

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> AsciiWordPiece | None:
        """The path for a parsed ``tokenizer.json``, or None when its rules are not these."""
        normalizer = spec.get("normalizer") or {}
        pre = spec.get("pre_tokenizer") or {}
        model = spec.get("model") or {}
        if (
            normalizer.get("type") != "BertNormalizer"
            or not normalizer.get("clean_text", False)
            or pre.get("type") != "BertPreTokenizer"
            or model.get("type") != "WordPiece"
            or model.get("unk_token") not in model.get("vocab", {})
            # A normalized added token is matched after the normalizer (a control dropped
            # inside it still makes it); these rules look for it in the raw piece only.
            or any(t.get("normalized", False) for t in spec.get("added_tokens") or [])
        ):
            return None
        return cls(
            model["vocab"],
            unknown=model["unk_token"],
            prefix=model.get("continuing_subword_prefix", "##"),
            max_word_chars=int(model.get("max_input_chars_per_word", 100)),
            lowercase=bool(normalizer.get("lowercase", True)),
            added=[t["content"] for t in spec.get("added_tokens") or []],
        )

    def tables(self) -> WordPieceTables | None:
        """The tables the compiled path counts with, or None when it cannot stand for this one:
        an added token that is not ASCII may match an ASCII piece under Unicode case folding
        (the Kelvin sign matches ``k``), which the compiled path does not do."""
        if not all(token.isascii() for token in self._added_tokens):
            return None
        return WordPieceTables(
            first=list(self._first),
            first_ids=list(self._first.values()),
            continuations=list(self._next),
            continuation_ids=list(self._next.values()),
            unknown=self._unknown,
            max_word_chars=self._max_word_chars,
            lowercase=self._lowercase,
            added=list(self._added_tokens),
        )

    def ids(self, piece: str) -> list[int] | None:
        """The ids of ``piece`` (no whitespace in it), or None when it is not for this path."""
        if not piece.isascii() or (self._added is not None and self._added.search(piece)):
            return None
        if self._lowercase:
            piece = piece.lower()
        if _CONTROL.search(piece):
            piece = _CONTROL.sub("", piece)
        first = self._first
        out: list[int] = []
        for word in _WORDS.findall(piece):
            known = first.get(word)
            if known is not None:
                out.append(known)  # the usual case: the whole word is an entry
            else:
                out.extend(self._word(word))
        return out

    def _word(self, word: str) -> list[int]:
        length = len(word)
        if length > self._max_word_chars:
            return [self._unknown]
        table = self._first
        out: list[int] = []
        start = 0
        while start < length:
            end = min(length, start + self._longest)
            while end > start and word[start:end] not in table:
                end -= 1
            if end == start:
                return [self._unknown]  # no entry fits: the whole word is unknown
            out.append(table[word[start:end]])
            start = end
            table = self._next
        return out


def take(
    path: AsciiWordPiece | None, pieces: Iterable[str]
) -> tuple[list[tuple[str, list[int]]], list[str]]:
    """The ids of the ``pieces`` this ``path`` takes, and the pieces left for `tokenizers`."""
    if path is None:
        return [], list(pieces)
    done: list[tuple[str, list[int]]] = []
    left: list[str] = []
    for piece in pieces:
        ids = path.ids(piece)
        if ids is None:
            left.append(piece)
        else:
            done.append((piece, ids))
    return done, left
