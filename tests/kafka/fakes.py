"""A deterministic, deliberately slow embedding backend for backpressure tests."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray


class SlowHashBackend:
    """Vectors from a hash of the text; every batch costs ``delay_s`` of wall time."""

    dimension = 16

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.batches = 0
        self._lock = threading.Lock()

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        return [min(256, 2 + len(t) // 4) for t in texts]

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        time.sleep(self.delay_s)
        with self._lock:
            self.batches += 1
        rows = []
        for text in texts:
            digest = hashlib.sha256(text.encode()).digest()[: self.dimension]
            rows.append(np.frombuffer(digest, dtype=np.uint8).astype(np.float32) - 127.5)
        out = np.stack(rows) if rows else np.zeros((0, self.dimension), np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)
