"""Generated texts for the piece-id tests (every kind of whitespace, accents, CJK, special
tokens written in the text, over-long words) and the real tokenizer with or without truncation."""

from __future__ import annotations

from pathlib import Path

from hypothesis import strategies as st
from tokenizers import Tokenizer

WORDS = [
    "kafka",
    "Partition",
    "naïve",
    "e\u0301t\u00e9",  # a combining accent
    "\u0301",  # a combining mark alone: it follows whitespace
    "東京",
    "データ",
    "مرحبا",
    "don't",
    "U.S.",
    "3.14",
    "[CLS]",
    "[MASK]",
    "[UNK]",
    "##ing",
    "\u2603",
    "\u200b",  # zero-width space: no whitespace to Python, dropped by the normaliser
    "x" * 120,  # longer than WordPiece's 100 characters per word
    "re-embedding",
    "(chunk)",
]


SPACES = [
    " ",
    "  ",
    "\t",
    "\n",
    "\r\n",
    "\x0b",
    "\x0c",
    "\x1c",
    "\x85",
    "\u00a0",
    "\u2003",
    "\u3000",
]


def tokenizer(source_dir: Path, max_length: int | None) -> Tokenizer:
    loaded = Tokenizer.from_file(str(source_dir / "tokenizer.json"))
    loaded.no_padding()
    if max_length is None:
        loaded.no_truncation()
    else:
        loaded.enable_truncation(max_length=max_length)
    return loaded


texts = st.lists(
    st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(SPACES)), max_size=30).map(
        lambda parts: "".join(w + s for w, s in parts)
    )
    | st.text(max_size=60),
    max_size=12,
)
