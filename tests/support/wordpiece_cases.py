"""The WordPiece twin against `tokenizers`: the real tokenizer.json loaded both ways (cased and
lower-cased), and generated pieces full of what the ASCII path must take or decline."""

from __future__ import annotations

import functools
import json
import string
from pathlib import Path
from typing import Any

from hypothesis import strategies as st
from tokenizers import Tokenizer

from worker.wordpiece import AsciiWordPiece


def loaded(spec: dict[str, Any]) -> tuple[AsciiWordPiece, Tokenizer]:
    path = AsciiWordPiece.from_spec(spec)
    assert path is not None
    tokenizer = Tokenizer.from_str(json.dumps(spec))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return path, tokenizer


@functools.cache
def by_case(tokenizer_path: str, lowercase: bool) -> tuple[AsciiWordPiece, Tokenizer]:
    return loaded(spec_of(tokenizer_path, lowercase=lowercase))


def spec_of(tokenizer_path: str, **normalizer: Any) -> dict[str, Any]:
    spec: dict[str, Any] = json.loads(Path(tokenizer_path).read_text(encoding="utf-8"))
    spec["normalizer"].update(normalizer)
    return spec


# Letters, digits, punctuation and the control characters a piece can hold, plus fragments of
# added tokens and WordPiece's own prefix. The units' pieces join across the whitespace the
# normalizer drops (tokens.NOT_SEPARATORS: \x0b, \x0c, \x1c-\x1f), so those are in too.
_ALPHABET = (
    string.ascii_letters
    + string.digits
    + string.punctuation
    + "\x00\x01\x07\x0b\x0c\x0e\x1b\x1c\x1f\x7f"
)


_FRAGMENTS = ["[CLS]", "[mask]", "[Sep", "##", "un", "##able", "é", "x" * 101, "ing", "'s"]


pieces = st.lists(
    st.one_of(st.text(alphabet=_ALPHABET, min_size=1, max_size=30), st.sampled_from(_FRAGMENTS)),
    min_size=1,
    max_size=6,
).map("".join)
