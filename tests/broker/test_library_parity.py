"""The library's default (``worker.build``) and the worker on the real broker cut the same
chunks with the same ids: the README's library example is the worker's chunking."""

from __future__ import annotations

from pathlib import Path

import pytest

import worker
from tests.support import kafka_io
from tests.support.long_document import long_markdown
from worker.wire.events import DocumentEvent
from worker.wire.records import chunk_ids

pytestmark = pytest.mark.kafka
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(300)
async def test_the_library_default_cuts_the_workers_chunks_with_its_ids(
    kafka_bootstrap: str, topic_names: dict[str, str]
) -> None:
    docs = [
        DocumentEvent(
            id=path.name,
            text=path.read_text(encoding="utf-8"),
            content_type="text/markdown" if path.suffix == ".md" else "text/plain",
        )
        for path in sorted((REPO / "examples").iterdir())
    ]
    docs.append(
        DocumentEvent(id="long", text=long_markdown(80_000, seed=8), content_type="text/markdown")
    )
    settings = kafka_io.make_settings(kafka_bootstrap, topic_names)  # the defaults: sentence
    await kafka_io.create(settings, partitions=2)
    await kafka_io.produce_raw(
        kafka_bootstrap, settings.input_topic, kafka_io.encode_documents(docs)
    )
    await kafka_io.run_worker_to_end(settings, timeout_s=200)
    events = await kafka_io.chunk_events(kafka_bootstrap, settings.output_topic)

    built = worker.build("sentence")
    for doc in docs:
        chunks = worker.chunk_document_sync(built, doc.text, doc.content_type, None)
        texts = [c.text for c in chunks]
        theirs = sorted((e for e in events if e.doc_id == doc.id), key=lambda e: e.index)
        assert [(e.text, e.start_index, e.token_count) for e in theirs] == [
            (c.text, c.start_index, c.token_count) for c in chunks
        ], doc.id
        assert [e.chunk_id for e in theirs] == chunk_ids(doc.id, built.fingerprint, texts)
