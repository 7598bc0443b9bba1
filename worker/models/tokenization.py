"""Tokenising for the encoder: truncated to the model's window, padded to the longest in a batch.

The tokenizer.json shipped with a sentence-transformers model may carry its own truncation and
fixed padding (all-MiniLM-L6-v2's says 128 and pads to 128); both are replaced here, because the
model's window is ``max_seq_length`` from the sentence-transformers config (256) and padding
beyond the longest text in a batch is wasted compute. Padding is done here in numpy rather than by
the tokenizer so that encodings made earlier (to measure lengths) can be reused unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from tokenizers import Encoding, Tokenizer

_PAD_TOKEN = "[PAD]"


@dataclass(frozen=True)
class EncodedBatch:
    """Model inputs for one batch, all ``[batch, longest]`` int64."""

    input_ids: NDArray[np.int64]
    attention_mask: NDArray[np.int64]
    token_type_ids: NDArray[np.int64]


def load_tokenizer(path: Path, max_length: int) -> Tokenizer:
    """The tokenizer with truncation to ``max_length`` tokens and no padding."""
    tokenizer = Tokenizer.from_file(str(path))
    # Truncation counts the [CLS]/[SEP] the post-processor adds, as sentence-transformers does.
    tokenizer.enable_truncation(max_length=max_length)
    tokenizer.no_padding()
    return tokenizer


def pad_id(tokenizer: Tokenizer) -> int:
    found = tokenizer.token_to_id(_PAD_TOKEN)
    return found if found is not None else 0


def encode(tokenizer: Tokenizer, texts: Sequence[str]) -> list[Encoding]:
    return tokenizer.encode_batch(list(texts))


def pad(encodings: Sequence[Encoding], pad_token_id: int = 0) -> EncodedBatch:
    """Right-pad to the longest encoding; padding positions get attention 0."""
    longest = max((len(e.ids) for e in encodings), default=0)
    shape = (len(encodings), longest)
    input_ids = np.full(shape, pad_token_id, dtype=np.int64)
    attention_mask = np.zeros(shape, dtype=np.int64)
    token_type_ids = np.zeros(shape, dtype=np.int64)
    for row, encoding in enumerate(encodings):
        n = len(encoding.ids)
        input_ids[row, :n] = encoding.ids
        attention_mask[row, :n] = 1
        token_type_ids[row, :n] = encoding.type_ids
    return EncodedBatch(input_ids, attention_mask, token_type_ids)
