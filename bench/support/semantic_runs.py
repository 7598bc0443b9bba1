"""What the semantic and static benchmarks time and score: a boundary model behind a clock
(:class:`Timed`), the embedding strategies as the worker builds them (:func:`ours`), chonkie's
semantic chunker fed the same vectors (:func:`chonkie_runner`), and seam precision/recall/F1
over documents with known seams (:func:`quality`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tests.support.embedding import embed_batch
from tests.support.seams import Scores, SeamDocument, score
from worker.chunking import registry
from worker.models.backend import EmbeddingBackend
from worker.models.reference import describe, find
from worker.pipeline import chunk_document_sync


class Timed:
    """An embed function that adds up the time spent in it."""

    def __init__(self, embedder: EmbeddingBackend) -> None:
        self.embedder = embedder
        self.seconds = 0.0
        self.texts = 0

    def __call__(self, texts: Sequence[str]) -> NDArray[np.float32]:
        began = time.perf_counter()
        out = embed_batch(self.embedder, list(texts))
        self.seconds += time.perf_counter() - began
        self.texts += len(texts)
        return out


Runner = Callable[[str], list[int]]  # document text → chunk start offsets


def ours(name: str, model_dir: str, embed: Timed) -> Runner:
    # As the worker builds it: sizes in the retrieval transformer's tokens.
    context = registry.BuildContext(
        boundary=describe(Path(model_dir), "boundary"), retrieval=find("retrieval", None)
    )
    built = registry.build(name, {}, context)
    assert built.needs_model

    def run(text: str) -> list[int]:
        chunks = chunk_document_sync(built, text, "text/plain", embed)
        return [c.start_index for c in chunks]

    return run


def chonkie_runner(embed: Timed, skip_window: int) -> Runner | None:
    try:
        from chonkie import SemanticChunker
        from chonkie.embeddings import BaseEmbeddings
    except ImportError:
        return None

    # chonkie is never analysed (pyproject.toml: the bench extra's peers), so its base is Any.
    class Adapter(BaseEmbeddings):  # type: ignore[misc]
        """chonkie's embeddings interface over our embedder: the same vectors for both."""

        def embed(self, text: str) -> NDArray[np.float32]:
            row: NDArray[np.float32] = embed([text])[0]
            return row

        def embed_batch(self, texts: list[str]) -> list[NDArray[np.float32]]:
            return list(embed(texts))

        @property
        def dimension(self) -> int:
            return embed.embedder.dimension

        def get_tokenizer(self) -> Any:
            return "character"  # chunk_size in characters, as ours

    chunker = SemanticChunker(embedding_model=Adapter(), skip_window=skip_window)

    def run(text: str) -> list[int]:
        starts, cursor = [], 0
        for chunk in chunker.chunk(text):
            # chonkie's offsets count the text of earlier chunks; find each chunk for real.
            found = text.find(chunk.text.strip()[:80], cursor)
            position = found if found >= 0 else cursor
            starts.append(position)
            cursor = position + 1
        return starts

    return run


def quality(run: Runner, docs: list[SeamDocument]) -> Scores:
    total = Scores(0, 0, 0)
    for doc in docs:
        total = total + score(doc.text, doc.seams, run(doc.text))
    return total
