"""A small deterministic embedder for unit tests: hashed bag of words, L2-normalised.

Sentences that share words point the same way, so topics written with distinct vocabularies
give the similarity dips the strategies look for, without a model.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

DIMENSION = 64
_WORD = re.compile(r"\w+")
_STOP = frozenset({"the", "a", "of", "and"})


def embed(texts: Sequence[str]) -> NDArray[np.float32]:
    out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
    for row, text in enumerate(texts):
        for word in _WORD.findall(text.lower()):
            if word in _STOP:
                continue
            out[row, zlib.crc32(word.encode()) % DIMENSION] += 1.0
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return np.divide(out, norms, out=np.zeros_like(out), where=norms > 0)


class RecordingEmbedder:
    """``embed`` that remembers every call, to check what a strategy asked for."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, texts: list[str]) -> NDArray[np.float32]:
        self.calls.append(list(texts))
        return embed(texts)


TOPICS = {
    # Eleven words each (a prime), so the word picks below cycle through all of them.
    "cooking": "chef simmers onions garlic butter sauce pan stove recipe kitchen dinner",
    "astronomy": "telescope observes galaxies stars planets orbit comet nebula cosmos night moon",
    "finance": "bank lends money interest loans credit markets stocks bonds investors fund",
    "sailing": "sailor trims sails wind boat harbour mast rope keel anchor sea",
}


def topic_sentences(topic: str, count: int, offset: int = 0) -> list[str]:
    """``count`` different sentences drawn from one topic's vocabulary."""
    words = TOPICS[topic].split()
    sentences = []
    for i in range(count):
        k = offset + i
        picked = [words[(k * 4 + j) % len(words)] for j in range(6)]
        sentences.append(f"The {' '.join(picked)}.")
    return sentences


def topic_document(topics: Sequence[str], per_topic: int) -> tuple[str, list[int]]:
    """Paragraphs of ``per_topic`` sentences per topic, and the offsets where topics start."""
    paragraphs = []
    seams = []
    position = 0
    for n, topic in enumerate(topics):
        paragraph = " ".join(topic_sentences(topic, per_topic, offset=n))
        if n:
            seams.append(position)
        paragraphs.append(paragraph)
        position += len(paragraph) + 2
    return "\n\n".join(paragraphs), seams
