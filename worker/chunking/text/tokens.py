"""Token counting units: how a strategy measures the size of a piece of text.

A unit is either ``"character"`` (the length of the Python ``str``, the default) or the path
of a Hugging Face ``tokenizer.json``, counted with the ``tokenizers`` library without special
tokens, so a count is what the text itself costs inside a model's window.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from tokenizers import Tokenizer

CHARACTER = "character"


@runtime_checkable
class TokenCounter(Protocol):
    """Measures text in one unit. ``count`` must be deterministic and ``count("") == 0``."""

    @property
    def unit(self) -> str: ...

    def count(self, text: str) -> int: ...


class CharacterCounter:
    """One unit per Unicode code point (``len`` of the ``str``)."""

    unit = CHARACTER

    def count(self, text: str) -> int:
        return len(text)


class TokenizerCounter:
    """Counts the tokens a Hugging Face tokenizer produces for the text, no special tokens."""

    def __init__(self, path: str, tokenizer: Tokenizer) -> None:
        self._path = path
        self._tokenizer = tokenizer

    @property
    def unit(self) -> str:
        return self._path

    def count(self, text: str) -> int:
        if not text:
            return 0
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)


# Loading a tokenizer.json parses a vocabulary of tens of thousands of entries; every chunker
# built for the same path shares one instance. Keyed by the resolved path so that two
# spellings of one file do not load it twice.
_TOKENIZERS: dict[str, Tokenizer] = {}
_TOKENIZERS_LOCK = threading.Lock()


def _load_tokenizer(path: str) -> Tokenizer:
    from tokenizers import Tokenizer

    key = str(Path(path).resolve())
    with _TOKENIZERS_LOCK:
        tokenizer = _TOKENIZERS.get(key)
        if tokenizer is None:
            if not Path(key).is_file():
                raise ValueError(f"tokenizer file not found: {path!r}")
            try:
                tokenizer = Tokenizer.from_file(key)
            except Exception as exc:  # the library raises plain Exception on a bad file
                raise ValueError(f"cannot load tokenizer {path!r}: {exc}") from exc
            # Counting must see the whole text: a truncating or padding tokenizer.json would
            # make every long text look short.
            tokenizer.no_truncation()
            tokenizer.no_padding()
            _TOKENIZERS[key] = tokenizer
        return tokenizer


def make_counter(unit: str = CHARACTER) -> TokenCounter:
    """A counter for ``unit``: ``"character"`` or the path of a ``tokenizer.json``.

    Raises ``ValueError`` when the unit is empty or the tokenizer file cannot be loaded.
    """
    if unit == CHARACTER:
        return CharacterCounter()
    if not unit:
        raise ValueError("token unit must be 'character' or the path of a tokenizer.json")
    return TokenizerCounter(unit, _load_tokenizer(unit))
