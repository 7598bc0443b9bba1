"""Generated documents for the worker tests, and the check that every one of them came out
whole (each document's chunks, in order, once)."""

from __future__ import annotations

import random
from collections import defaultdict

from worker.wire.events import ChunkEvent, DocumentEvent

WORDS = [
    "stream", "chunk", "offset", "broker", "partition", "consumer", "retrieval", "vector",
    "embedding", "sentence", "paragraph", "commit", "replay", "durable", "ordered",
    "idempotent", "latency", "throughput", "document",
]  # fmt: skip


def make_docs(n: int, seed: int = 7, prefix: str = "doc") -> list[DocumentEvent]:
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        sentences = []
        for _ in range(rng.randint(1, 40)):
            words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 25)))
            sentences.append(words.capitalize() + rng.choice([".", "!", "?"]))
        paragraphs = [" ".join(sentences[j : j + 5]) for j in range(0, len(sentences), 5)]
        docs.append(
            DocumentEvent(
                id=f"{prefix}-{i}",
                text="\n\n".join(paragraphs),
                version=rng.choice([None, 1, "v2"]),
                metadata={"n": i, "lang": "en"},
            )
        )
    return docs


def check_complete(docs: list[DocumentEvent], events: list[ChunkEvent]) -> dict[str, int]:
    """Every document has exactly one full chunk set whose offsets reproduce its text.

    Returns the number of *duplicate* events per document (replays), after checking that a
    replayed chunk is identical in id and content to the first copy."""
    by_doc: dict[str, dict[int, ChunkEvent]] = defaultdict(dict)
    duplicates: dict[str, int] = defaultdict(int)
    for ev in events:
        first = by_doc[ev.doc_id].get(ev.index)
        if first is not None:
            assert (first.chunk_id, first.text, first.start_index) == (
                ev.chunk_id,
                ev.text,
                ev.start_index,
            ), f"replay of {ev.doc_id}#{ev.index} differs"
            duplicates[ev.doc_id] += 1
        else:
            by_doc[ev.doc_id][ev.index] = ev
    assert set(by_doc) == {d.id for d in docs}, "documents missing from the output"
    for doc in docs:
        chunks = by_doc[doc.id]
        count = next(iter(chunks.values())).count
        assert sorted(chunks) == list(range(count)), f"{doc.id}: chunk indexes incomplete"
        covered = [False] * len(doc.text)
        for ev in chunks.values():
            assert ev.text == doc.text[ev.start_index : ev.end_index]
            assert all(ev.metadata[k] == v for k, v in doc.metadata.items())
            assert ev.doc_version == (None if doc.version is None else str(doc.version))
            for i in range(ev.start_index, ev.end_index):
                covered[i] = True
        lost = [c for c, cov in zip(doc.text, covered, strict=True) if not cov and not c.isspace()]
        assert not lost, f"{doc.id}: characters not in any chunk"
        assert len({ev.chunk_id for ev in chunks.values()}) == count
    return dict(duplicates)
