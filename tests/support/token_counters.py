"""The counters tests measure chunks with: characters (the product's own CharacterCounter), or
a whole-text tokenization by the `tokenizers` library, the plain reading of "how many tokens is
this text" that the worker's piece-wise counting (worker.chunking.text.tokens.PieceCounter)
must agree with. Loaded here with the library alone, so the reference shares no code with
what it checks."""

from __future__ import annotations

import functools
from pathlib import Path

from tokenizers import Tokenizer

from worker.chunking.text.tokens import CHARACTER, CharacterCounter, TokenCounter


class WholeTextCounter:
    """The tokens a tokenizer.json makes of the whole text, without special tokens."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._tokenizer = _tokenizer(str(Path(path).resolve()))

    @property
    def unit(self) -> str:
        return self._path

    def count(self, text: str) -> int:
        if not text:
            return 0
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)


@functools.cache
def _tokenizer(path: str) -> Tokenizer:
    tokenizer = Tokenizer.from_file(path)
    tokenizer.no_truncation()  # a truncating tokenizer.json would make long texts look short
    tokenizer.no_padding()
    return tokenizer


def make_counter(unit: str = CHARACTER) -> TokenCounter:
    """``"character"``, or the path of a tokenizer.json."""
    return CharacterCounter() if unit == CHARACTER else WholeTextCounter(unit)
