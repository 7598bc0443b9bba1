"""Tokenising for the encoder: truncated to the model's window, padded to the longest in a batch.

The tokenizer.json shipped with a sentence-transformers model may carry its own truncation and
fixed padding (all-MiniLM-L6-v2's says 128 and pads to 128); both are replaced here, because the
model's window is ``max_seq_length`` from the sentence-transformers config (256) and padding
beyond the longest text in a batch is wasted compute.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from tokenizers import Tokenizer

_PAD_TOKEN = "[PAD]"


@dataclass(frozen=True)
class EncodedBatch:
    """Model inputs for one batch, all ``[batch, longest]`` int64."""

    input_ids: NDArray[np.int64]
    attention_mask: NDArray[np.int64]
    token_type_ids: NDArray[np.int64]


def load_tokenizer(path: Path, max_length: int) -> Tokenizer:
    tokenizer = Tokenizer.from_file(str(path))
    # Truncation counts the [CLS]/[SEP] the post-processor adds, as sentence-transformers does.
    tokenizer.enable_truncation(max_length=max_length)
    pad_id = tokenizer.token_to_id(_PAD_TOKEN)
    tokenizer.enable_padding(pad_id=pad_id if pad_id is not None else 0, pad_token=_PAD_TOKEN)
    return tokenizer


def encode(tokenizer: Tokenizer, texts: Sequence[str]) -> EncodedBatch:
    encodings = tokenizer.encode_batch(list(texts))
    return EncodedBatch(
        input_ids=np.array([e.ids for e in encodings], dtype=np.int64),
        attention_mask=np.array([e.attention_mask for e in encodings], dtype=np.int64),
        token_type_ids=np.array([e.type_ids for e in encodings], dtype=np.int64),
    )


def token_lengths(tokenizer: Tokenizer, texts: Sequence[str]) -> list[int]:
    return [sum(e.attention_mask) for e in tokenizer.encode_batch(list(texts))]
