"""A small deterministic embedder for unit tests: hashed bag of words, L2-normalised.

Sentences that share words point the same way, so topics written with distinct vocabularies
give the similarity dips the strategies look for, without a model.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from worker.chunking.types import Chunk, ContentType, EmbeddingChunker
from worker.models.reference import ModelRef, Role
from worker.pipeline import SyncEmbedFn, assemble_with_sync

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
    unit: NDArray[np.float32] = np.divide(out, norms, out=np.zeros_like(out), where=norms > 0)
    return unit


class RecordingEmbedder:
    """``embed`` that remembers every call, to check what a strategy asked for."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, texts: Sequence[str]) -> NDArray[np.float32]:
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


class WithEmbedder:
    """An embedding chunker and the embed function the pipeline feeds it from, so a test can
    call ``chunk(text)``: the one plan → embed → assemble of :mod:`worker.pipeline`."""

    def __init__(self, chunker: EmbeddingChunker, embed_fn: SyncEmbedFn) -> None:
        self.chunker = chunker
        self.embed = embed_fn

    def chunk(self, text: str, *, content_type: ContentType = "text/plain") -> list[Chunk]:
        return assemble_with_sync(self.chunker, text, content_type, self.embed)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.chunker, name)


def with_embedder(chunker_type: Callable[..., Any], embed_fn: SyncEmbedFn, **params: Any) -> Any:
    """``chunker_type(**params)`` behind :class:`WithEmbedder` (``Any``: tests also reach the
    chunker's own attributes through it)."""
    return WithEmbedder(chunker_type(**params), embed_fn)


# The tokenizer of the model scripts/bootstrap builds (any WordPiece tokenizer.json would do).
TOKENIZER = Path(__file__).resolve().parents[2] / ".cache/models/all-MiniLM-L6-v2/tokenizer.json"


def model_ref(identity: str, role: Role = "boundary") -> ModelRef:
    """A model reference for code that reads who the model is and its tokenizer (the model's
    directory, /models/<identity>, need not exist)."""
    return ModelRef(
        role=role,
        directory=Path(f"/models/{identity}"),
        kind="static",
        variant="static",
        identity=identity,
        dimension=DIMENSION,
        max_seq_length=None,
        tokenizer=TOKENIZER,
    )
