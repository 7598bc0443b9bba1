"""From a table to an index of its chunks with stock parts on both sides: a PostgreSQL table of
documents (deploy/connect/documents.sql) → Debezium's PostgreSQL source with stock transforms
(deploy/connect/documents-debezium.json) → the worker with the row mapping
(CHUNKSTREAM_INPUT_FORMAT=row) → Debezium's JDBC sink → the chunk table, on one Connect worker.

Rows that exist before the connector starts (its initial snapshot, one of them larger than
Kafka's default 1 MB record), then inserts, updates (a text edit, a title-only edit of a
TOASTed row, one that writes the same text again), deletes and a primary-key change, with the
worker killed by SIGKILL in the middle: after each step the chunk table must equal chunking the
table's current rows directly (ids, texts, offsets, the title in the metadata; none stale, none
missing). Then the pitfalls: without REPLICA IDENTITY FULL an update of a TOASTed row is a dead
letter (`unavailable_value`) and its chunks stay; a row whose version (its LSN) is lower than
the one before still applies (a restored database); a TRUNCATE reaches nobody, and the
documented statement removes what it left; a row above the recipe's raised record limit stops
the source task, visibly.

Events go out without vectors here: tests/connect/test_pgvector_sink.py and the table demo
(tests/cli/test_demo_from_table.py) check the vectors; the transformer would spend minutes on
the megabyte row's chunks on this machine.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import kafka_io
from tests.support.corpus import gather
from tests.support.network import free_port
from worker.config import Settings
from worker.pipeline import chunk_document_sync
from worker.wire.records import chunk_ids

pytestmark = pytest.mark.kafka

REPO = Path(__file__).resolve().parents[2]
CONNECT = REPO / "deploy" / "connect"
LOCAL_POSTGRES = CONNECT / "local-postgres"
LOCAL_CONNECT = CONNECT / "local-connect"
# What docs/operating/from-a-table.md says to run after a TRUNCATE (same database).
CLEANUP_SQL = "DELETE FROM chunks WHERE doc_id NOT IN (SELECT id FROM documents)"
ROW_SETTINGS = {
    "input_format": "row",
    "row_text": "body",
    "row_version": "__lsn",
    "row_content_type": "content_type",
    "row_metadata": "title",
}

Chunked = dict[str, tuple[str, int, str, int, int, str | None]]


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
        sql(run_dir, (CONNECT / "documents.sql").read_text())
        yield started.stdout.strip().splitlines()[-1], run_dir
    finally:
        subprocess.run([str(LOCAL_POSTGRES), "stop", "--dir", str(run_dir)], timeout=120)
        shutil.rmtree(run_dir, ignore_errors=True)


def sql(run_dir: Path, statements: str) -> None:
    result = subprocess.run(
        [str(LOCAL_POSTGRES), "psql", "--dir", str(run_dir), "--", "-q"],
        input=statements,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr


def query(run_dir: Path, select: str) -> list[dict[str, Any]]:
    wrapped = f"SELECT coalesce(json_agg(q), '[]'::json) FROM ({select}) q"
    result = subprocess.run(
        [str(LOCAL_POSTGRES), "psql", "--dir", str(run_dir), "--", "-At", "-c", wrapped],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    return rows


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def insert(run_dir: Path, rows: list[tuple[str, str, str, str]]) -> None:
    values = ",\n".join(
        f"({literal(i)}, {literal(title)}, {literal(body)}, {literal(ctype)})"
        for i, title, body, ctype in rows
    )
    sql(run_dir, f"INSERT INTO documents (id, title, body, content_type) VALUES {values};")


def expected(run_dir: Path, settings: Settings) -> Chunked:
    """Chunking the table's current rows directly, as the worker would."""
    built = kafka_io.build_as_worker(settings)
    out: Chunked = {}
    for row in query(run_dir, "SELECT id, title, body, content_type FROM documents"):
        chunks = chunk_document_sync(built, row["body"], row["content_type"], None)
        ids = chunk_ids(row["id"], built.fingerprint, [c.text for c in chunks], None)
        for index, (chunk_id, c) in enumerate(zip(ids, chunks, strict=True)):
            out[chunk_id] = (row["id"], index, c.text, c.start_index, c.end_index, row["title"])
    return out


def index(run_dir: Path) -> Chunked:
    rows = query(
        run_dir,
        "SELECT chunk_id, doc_id, index, text, start_index, end_index, "
        "metadata->>'title' AS title FROM chunks",
    )
    return {
        r["chunk_id"]: (
            r["doc_id"],
            r["index"],
            r["text"],
            r["start_index"],
            r["end_index"],
            r["title"],
        )
        for r in rows
    }


async def wait_equal(run_dir: Path, settings: Settings, timeout_s: float = 240) -> Chunked:
    """Until the chunk table equals chunking the current rows; on timeout, what differs."""
    want = expected(run_dir, settings)
    deadline = time.monotonic() + timeout_s
    while True:
        have = await asyncio.to_thread(index, run_dir)
        if have == want:
            return have
        if time.monotonic() > deadline:
            stale = sorted({have[k][0] for k in set(have) - set(want)})
            missing = sorted({want[k][0] for k in set(want) - set(have)})
            changed = sorted({want[k][0] for k in set(want) & set(have) if want[k] != have[k]})
            pytest.fail(f"the index differs: stale {stale}, missing {missing}, changed {changed}")
        await asyncio.sleep(1)


async def wait_versions(
    run_dir: Path, doc_id: str, done: Callable[[set[int]], bool], timeout_s: float = 240
) -> set[int]:
    """The versions a document's chunks carry in the index, once ``done`` holds (or at the
    timeout, for the caller's assertion to show)."""
    deadline = time.monotonic() + timeout_s
    while True:
        rows = await asyncio.to_thread(
            query,
            run_dir,
            f"SELECT DISTINCT doc_version FROM chunks WHERE doc_id = {literal(doc_id)}",
        )
        versions = {int(r["doc_version"]) for r in rows}
        if done(versions) or time.monotonic() > deadline:
            return versions
        await asyncio.sleep(1)


def connector_state(connect_dir: Path, name: str) -> tuple[str, str]:
    """The state of a connector's task and its trace, from Connect's REST API."""
    result = subprocess.run(
        [str(LOCAL_CONNECT), "status", "--dir", str(connect_dir), "--name", name],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    tasks = json.loads(result.stdout).get("tasks", [])
    if not tasks:
        return "", ""
    return str(tasks[0]["state"]), str(tasks[0].get("trace", ""))


def corpus_rows() -> list[tuple[str, str, str, str]]:
    docs = [d for d in gather(min_chars=1500) if d.name != "chunkstream"]
    rows: list[tuple[str, str, str, str]] = [
        (f"pkg/{d.name}", d.name.title(), d.text, d.content_type) for d in docs[:16]
    ]
    # Larger than Kafka's default 1 MB record (max.request.size, max.message.bytes).
    large = "\n\n".join(d.text for d in docs)
    while len(large.encode()) < 1_200_000:
        large += "\n\n" + large
    rows.append(("large", "A large document", large[:1_200_000], "text/markdown"))
    return rows


def edited(text: str, marker: str) -> str:
    paragraphs = text.split("\n\n")
    paragraphs[len(paragraphs) // 2] = f"This paragraph was rewritten by the test ({marker})."
    return "\n\n".join(paragraphs)


# Connect, PostgreSQL and the worker on shared cores: the suite's 300 s is too tight a net.
@pytest.mark.timeout(900)
async def test_the_chunk_table_equals_chunking_the_tables_rows(
    kafka_bootstrap: str,
    topic_names: dict[str, str],
    postgres: tuple[str, Path],
    tmp_path: Path,
) -> None:
    jdbc_url, pg = postgres
    settings = kafka_io.make_settings(
        kafka_bootstrap, topic_names, strategy="sentence", encoding="connect-json",
        **ROW_SETTINGS,
    )  # fmt: skip
    await kafka_io.create(settings)
    # The initial snapshot: rows that exist before the connector starts.
    rows = corpus_rows()
    insert(pg, rows)
    # A TOASTed body (stored out of line: above the 2 kB threshold, kept uncompressed).
    sql(pg, "ALTER TABLE documents ALTER COLUMN body SET STORAGE EXTERNAL;")
    toasted = rows[0][2] * 3
    insert(pg, [("toasted", "TOASTed", toasted, "text/markdown")])

    connect_dir = tmp_path / "connect"
    slot = f"documents_{uuid.uuid4().hex[:6]}"
    started = await asyncio.to_thread(
        subprocess.run,
        [
            str(LOCAL_CONNECT), "start",
            "--bootstrap-servers", kafka_bootstrap,
            "--jdbc-url", jdbc_url,
            "--topic", settings.output_topic,
            "--rest-port", str(free_port()),
            "--name", f"chunks-{slot}",
            "--dir", str(connect_dir),
            "--from-table",
            "--source-topic", settings.input_topic,
            "--source-name", slot,
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    logs = [tmp_path / f"worker-{n}.log" for n in range(3)]
    procs = [kafka_io.worker_process(settings, logs[0])]
    try:
        # SIGKILL once part of the snapshot is committed and, most likely, some is in flight.
        for _ in range(1200):
            committed = await kafka_io.committed_offsets(kafka_bootstrap, settings.group_id)
            if sum(committed.values()) >= 4:
                break
            await asyncio.sleep(0.1)
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait()
        # Changes while no worker runs: inserts, a text edit, deletes.
        insert(pg, [(f"new/{n}", f"New {n}", rows[n + 3][2], "text/plain") for n in range(3)])
        sql(
            pg,
            f"UPDATE documents SET body = {literal(edited(rows[1][2], 'first'))} "
            f"WHERE id = {literal(rows[1][0])};"
            f"DELETE FROM documents WHERE id IN ({literal(rows[2][0])}, {literal(rows[5][0])});",
        )
        procs.append(kafka_io.worker_process(settings, logs[1]))
        before = await wait_equal(pg, settings, timeout_s=420)
        assert {v[0] for v in before.values()} >= {"large", "toasted", "new/0", rows[1][0]}

        # A title-only update of the TOASTed row (its body is not in the WAL record: REPLICA
        # IDENTITY FULL carries it), one that writes the same text again, a primary-key change.
        sql(
            pg,
            "UPDATE documents SET title = 'TOASTed, renamed' WHERE id = 'toasted';"
            f"UPDATE documents SET body = body WHERE id = {literal(rows[3][0])};"
            f"UPDATE documents SET id = 'renamed' WHERE id = {literal(rows[4][0])};",
        )
        after = await wait_equal(pg, settings)
        toasted_ids = {k for k, v in after.items() if v[0] == "toasted"}
        assert toasted_ids == {k for k, v in before.items() if v[0] == "toasted"}
        assert {after[k][5] for k in toasted_ids} == {"TOASTed, renamed"}
        assert rows[4][0] not in {v[0] for v in after.values()}

        # Without REPLICA IDENTITY FULL the update carries a placeholder, which is refused:
        # a dead letter, and the row's chunks stay (a marker row behind it shows it was read).
        sql(
            pg,
            "ALTER TABLE documents REPLICA IDENTITY DEFAULT;"
            "UPDATE documents SET title = 'placeholder' WHERE id = 'toasted';"
            "ALTER TABLE documents REPLICA IDENTITY FULL;",
        )
        insert(pg, [("marker/1", "Marker", "A row written after the placeholder.", "text/plain")])
        for _ in range(240):
            if any(v[0] == "marker/1" for v in index(pg).values()):
                break
            await asyncio.sleep(1)
        have = index(pg)
        assert {k: v for k, v in have.items() if v[0] == "toasted"} == {
            k: after[k] for k in toasted_ids
        }
        letters = await kafka_io.dead_letters(kafka_bootstrap, settings.dlq_topic)
        assert [(d.error_kind, d.source.topic) for d in letters] == [
            ("unavailable_value", settings.input_topic)
        ]
        assert "'toasted'" in letters[0].error_message
        sql(pg, "UPDATE documents SET title = 'TOASTed, renamed' WHERE id = 'toasted';")

        # A restored database: its WAL positions, the rows' versions, restart lower. The row
        # still applies (a version is an opaque string; offset order decides): its chunks
        # carry version 1 and the restored text, then the next real change (a higher LSN)
        # applies over it. Each step waits for its own evidence: the table's text is the same
        # after both, so the chunk table alone cannot tell them apart.
        row = query(pg, f"SELECT * FROM documents WHERE id = {literal(rows[6][0])}")[0]
        restored = {**row, "body": edited(row["body"], "restored"), "__lsn": 1}
        await kafka_io.produce_raw(
            kafka_bootstrap,
            settings.input_topic,
            [(row["id"].encode(), json.dumps(restored).encode(), [])],
        )
        assert await wait_versions(pg, row["id"], lambda v: v == {1}) == {1}
        sql(
            pg,
            f"UPDATE documents SET body = {literal(restored['body'])} "
            f"WHERE id = {literal(row['id'])};",
        )
        newer = await wait_versions(pg, row["id"], lambda v: len(v) == 1 and min(v) > 1)
        assert len(newer) == 1, newer
        assert min(newer) > 1, newer
        await wait_equal(pg, settings)

        # TRUNCATE reaches nobody: the chunks stay until the documented statement runs.
        sql(pg, "TRUNCATE documents;")
        insert(pg, [("marker/2", "Marker", "A row written after the truncate.", "text/plain")])
        for _ in range(240):
            if any(v[0] == "marker/2" for v in index(pg).values()):
                break
            await asyncio.sleep(1)
        assert "large" in {v[0] for v in index(pg).values()}
        sql(pg, CLEANUP_SQL + ";")
        assert {v[0] for v in (await wait_equal(pg, settings)).values()} == {"marker/2"}

        # A row above the source's raised record limit (16 MiB) stops the source task, visibly:
        # with errors.tolerance=none it is never skipped without a trace.
        sql(pg, "INSERT INTO documents (id, body) SELECT 'huge', repeat('A huge row. ', 1500000);")
        for _ in range(240):
            state = await asyncio.to_thread(connector_state, connect_dir, slot)
            if state[0] == "FAILED":
                break
            await asyncio.sleep(1)
        assert state[0] == "FAILED", state
        assert "max.request.size" in state[1], state[1][:2000]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=60)
        await asyncio.to_thread(
            subprocess.run, [str(LOCAL_CONNECT), "stop", "--dir", str(connect_dir)], timeout=60
        )
