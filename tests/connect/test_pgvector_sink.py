"""Into a real index with stock parts: the worker writes connect-json with embeddings, Apache
Kafka's Connect runtime runs Debezium's JDBC sink (deploy/connect/chunks-pgvector.json) into
PostgreSQL with pgvector (deploy/connect/local-postgres). Documents are produced, the worker is
killed with SIGKILL mid-stream, some documents are edited and some deleted, a new worker
finishes; the table then holds exactly the chunks of chunking each surviving document's last
version directly (ids, texts, offsets; none stale, none missing), their vectors are the
retrieval model's, and a nearest-neighbour SQL query on a question returns the chunk that holds
its answer."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.support import kafka_io
from tests.support.corpus import gather
from tests.support.network import free_port
from worker.inference.serving import retrieval_ref
from worker.models.loading import load_backend
from worker.pipeline import chunk_document_sync
from worker.wire.events import DocumentEvent
from worker.wire.records import chunk_ids

pytestmark = pytest.mark.kafka

REPO = Path(__file__).resolve().parents[2]
LOCAL_POSTGRES = REPO / "deploy" / "connect" / "local-postgres"
LOCAL_CONNECT = REPO / "deploy" / "connect" / "local-connect"
EXAMPLES = REPO / "examples"
# (question, document, a phrase of the answer): the answer's chunk must be in the top 5.
QUESTIONS = [
    (
        "Why should a chunker never split a code block?",
        "examples/retrieval-notes.txt",
        "half a function is useless",
    ),
    (
        "How can a pod restart without triggering a consumer group rebalance?",
        "examples/kafka-consumer-groups.md",
        "Static membership avoids a rebalance",
    ),
    (
        "How long did reviewers take to find the source of an answer with exact offsets?",
        "examples/retrieval-notes.txt",
        "3.5 seconds on average",
    ),
]


@pytest.fixture(scope="module")
def postgres() -> Iterator[tuple[str, Path]]:
    # Not under pytest's tmp_path: as root the server runs as the `postgres` user, who cannot
    # enter pytest's private (0700) temporary folders.
    run_dir = Path(tempfile.mkdtemp(prefix="chunkstream-postgres-"))
    run_dir.chmod(0o755)
    started = subprocess.run(
        [str(LOCAL_POSTGRES), "start", "--port", str(free_port()), "--dir", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert started.returncode == 0, started.stderr
    try:
        yield started.stdout.strip().splitlines()[-1], run_dir
    finally:
        subprocess.run([str(LOCAL_POSTGRES), "stop", "--dir", str(run_dir)], timeout=120)
        shutil.rmtree(run_dir, ignore_errors=True)


def query(run_dir: Path, sql: str, setup: str = "") -> list[dict[str, Any]]:
    """Rows of ``sql`` as JSON objects (psql on the recipe's server), ``setup`` run before it in
    the same session."""
    wrapped = f"{setup}SELECT coalesce(json_agg(q), '[]'::json) FROM ({sql}) q"
    result = subprocess.run(
        [str(LOCAL_POSTGRES), "psql", "--dir", str(run_dir), "--", "-q", "-At", "-c", wrapped],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    return rows


def documents() -> list[DocumentEvent]:
    """The examples and the installed packages' descriptions: real documents of real size."""
    docs = [
        DocumentEvent(
            id=f"examples/{path.name}",
            text=path.read_text(encoding="utf-8"),
            content_type="text/markdown" if path.suffix == ".md" else "text/plain",
            version=1,
        )
        for path in sorted(EXAMPLES.iterdir())
    ]
    # Not our own package's description: it is the README, which changes with every release.
    for doc in [d for d in gather(min_chars=1500) if d.name != "chunkstream"][:40]:
        docs.append(
            DocumentEvent(
                id=f"pkg/{doc.name}", text=doc.text, content_type=doc.content_type, version=1
            )
        )
    return docs


def edited(doc: DocumentEvent) -> DocumentEvent:
    paragraphs = doc.text.split("\n\n")
    middle = len(paragraphs) // 2
    paragraphs[middle] = "This paragraph was rewritten by the test: its chunk gets a new id."
    return DocumentEvent(
        id=doc.id, text="\n\n".join(paragraphs), content_type=doc.content_type, version=2
    )


# Connect, PostgreSQL and the worker on shared cores: the suite's 300 s is too tight a net.
@pytest.mark.timeout(900)
async def test_the_table_holds_exactly_the_current_chunks_and_answers_by_similarity(
    kafka_bootstrap: str,
    topic_names: dict[str, str],
    postgres: tuple[str, Path],
    tmp_path: Path,
) -> None:
    jdbc_url, pg_dir = postgres
    settings = kafka_io.make_settings(
        kafka_bootstrap,
        topic_names,
        strategy="sentence",
        encoding="connect-json",
        include_embeddings="true",
    )
    await kafka_io.create(settings)
    connector = f"chunks-pgvector-{uuid.uuid4().hex[:6]}"
    connect_dir = tmp_path / "connect"
    started = await asyncio.to_thread(
        subprocess.run,
        [
            str(LOCAL_CONNECT), "start",
            "--bootstrap-servers", kafka_bootstrap,
            "--jdbc-url", jdbc_url,
            "--topic", settings.output_topic,
            "--rest-port", str(free_port()),
            "--name", connector,
            "--dir", str(connect_dir),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    first = documents()
    edits = [edited(doc) for doc in first[1::3]]
    deleted = [doc.id for doc in first[4::5] if not doc.id.startswith("examples/")]
    logs = [tmp_path / "worker-0.log", tmp_path / "worker-1.log"]
    procs = [kafka_io.worker_process(settings, logs[0])]
    try:
        await kafka_io.produce_raw(
            kafka_bootstrap, settings.input_topic, kafka_io.encode_documents(first)
        )
        # Kill -9 once some work is committed and, most likely, some is still in flight.
        for _ in range(1200):
            committed = await kafka_io.committed_offsets(kafka_bootstrap, settings.group_id)
            if sum(committed.values()) >= len(first) // 4:
                break
            await asyncio.sleep(0.1)
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait()
        changes = kafka_io.encode_documents(edits) + [
            (doc_id.encode(), None, []) for doc_id in deleted
        ]
        await kafka_io.produce_raw(kafka_bootstrap, settings.input_topic, changes)
        procs.append(kafka_io.worker_process(settings, logs[1]))
        await kafka_io.wait_committed_to_end(
            kafka_bootstrap, settings.group_id, settings.input_topic, timeout_s=300
        )
        # The sink's own consumer group (Connect names it connect-<connector>) has applied
        # every chunk event and tombstone once it has committed the whole chunk topic.
        await kafka_io.wait_committed_to_end(
            kafka_bootstrap, f"connect-{connector}", settings.output_topic, timeout_s=300
        )
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=60)
        await asyncio.to_thread(
            subprocess.run, [str(LOCAL_CONNECT), "stop", "--dir", str(connect_dir)], timeout=60
        )

    last = {doc.id: doc for doc in [*first, *edits]}
    for doc_id in deleted:
        del last[doc_id]
    built = kafka_io.build_as_worker(settings)
    # With embeddings, a chunk's id names the model of its vector (schemas/: the chunk key).
    retrieval = retrieval_ref(settings)
    expected: dict[str, tuple[str, int, str, int, int]] = {}
    for doc in last.values():
        chunks = chunk_document_sync(built, doc.text, doc.content_type, None)
        ids = chunk_ids(doc.id, built.fingerprint, [c.text for c in chunks], retrieval.label)
        for index, (chunk_id, chunk) in enumerate(zip(ids, chunks, strict=True)):
            expected[chunk_id] = (doc.id, index, chunk.text, chunk.start_index, chunk.end_index)
    rows = query(
        pg_dir,
        "SELECT chunk_id, doc_id, index, text, start_index, end_index, "
        "vector_dims(embedding) AS dims, embedding_model FROM chunks",
    )
    table = {
        r["chunk_id"]: (r["doc_id"], r["index"], r["text"], r["start_index"], r["end_index"])
        for r in rows
    }
    assert len(table) == len(rows)
    assert sorted(set(table) - set(expected)) == [], "stale chunks in the index"
    assert sorted(set(expected) - set(table)) == [], "chunks missing from the index"
    assert table == expected
    assert {r["dims"] for r in rows} == {384}
    assert {r["embedding_model"] for r in rows} == {retrieval.label}

    # The vectors are the retrieval model's, at float32 precision (not halfvec's).
    model = load_backend(retrieval)
    sample = query(
        pg_dir, "SELECT text, embedding::text AS v FROM chunks ORDER BY chunk_id LIMIT 5"
    )
    stored = np.array([json.loads(r["v"]) for r in sample], dtype=np.float32)
    direct = model.embed([r["text"] for r in sample])
    np.testing.assert_allclose(stored, direct, atol=1e-5)

    for question, doc_id, phrase in QUESTIONS:
        vector = model.embed([question])[0]
        literal = "[" + ",".join(repr(float(x)) for x in vector) + "]"
        # The recipe's query: hnsw.ef_search as docs/operating/postgres-pgvector.md sets it.
        top = query(
            pg_dir,
            "SELECT doc_id, start_index, end_index FROM chunks "
            f"ORDER BY embedding <=> '{literal}'::vector LIMIT 5",
            setup="SET hnsw.ef_search = 200; ",
        )
        at = last[doc_id].text.index(phrase)
        holding = [
            r for r in top if r["doc_id"] == doc_id and r["start_index"] <= at < r["end_index"]
        ]
        assert holding, f"{question!r}: the top 5 are {top}"
