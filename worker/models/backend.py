"""The one surface the batcher and the strategies see of an embedding model.

Kept to two synchronous methods (plus the output width) so tests swap in a fake and the batcher
never learns about onnxruntime or tokenizers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray


@runtime_checkable
class EmbeddingBackend(Protocol):
    @property
    def dimension(self) -> int:
        """Width of one embedding."""
        ...

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        """Tokens each text occupies in the model's input (special tokens and truncation
        included), i.e. the length it is padded *from*. Must be cheap and thread-safe."""
        ...

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """``[len(texts), dimension]`` float32, L2-normalised, in input order. Blocking; called
        from up to the batcher's ``concurrent_batches`` threads at once."""
        ...
