"""From a table to an index of its chunks, end to end on the recipe's real parts
(docs/operating/from-a-table.md): PostgreSQL → Debezium's PostgreSQL source → the worker (row
mapping, chunks with their vectors) → Debezium's JDBC sink → pgvector, on one Connect worker.

1. A table of ``--rows`` rows of real text (the installed packages' descriptions, cut into
   groups of paragraphs and repeated to reach the count) is indexed from the connector's
   initial snapshot: rows per second and chunks embedded per second, from the connectors'
   start to the last chunk in the table.
2. A stream of edits to ``--edit-share`` of the rows at ``--edit-rate`` per second, each
   rewriting one sentence: the latency from a row's commit (Debezium's ``source.ts_ms``,
   carried into the chunks' metadata) to its new chunks in the table (a trigger stamps each
   written chunk row), p50/p99; and the chunks embedded per edit beside what re-embedding
   each changed row whole costs (pgai Vectorizer's approach: delete a changed row's
   embeddings, chunk and embed the whole row again), counted on the same edits and timed with
   the same model in this process.

The worker runs with ``CHUNKSTREAM_UNCHANGED_CHUNKS=skip`` (only chunks with new ids are
embedded and sent). ``--retrieval-model-dir`` picks the model of the vectors (default the
worker's, the transformer); the chunk table's column takes its dimension.

    .venv/bin/python -m bench.table_bench [--rows 10000] [--edit-share 0.01] [--edit-rate 5]
                                          [--retrieval-model-dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tests.support import kafka_io
from tests.support.corpus import gather
from tests.support.network import free_port
from worker.config import Settings
from worker.inference.serving import retrieval_ref
from worker.models.loading import load_backend
from worker.pipeline import chunk_document_sync
from worker.wire.records import chunk_ids

REPO = Path(__file__).resolve().parent.parent
CONNECT = REPO / "deploy" / "connect"
LOCAL_KAFKA = REPO / "deploy" / "kafka" / "local-kafka"
LOCAL_POSTGRES = CONNECT / "local-postgres"
LOCAL_CONNECT = CONNECT / "local-connect"
ROW_CHARS = 1500
# Every write of a chunk row stamped with the server's clock, for the commit-to-index latency.
STAMP_SQL = """
ALTER TABLE chunks ADD COLUMN indexed_at timestamptz;
CREATE FUNCTION stamp_indexed_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN NEW.indexed_at := clock_timestamp(); RETURN NEW; END $$;
CREATE TRIGGER chunks_indexed_at BEFORE INSERT OR UPDATE ON chunks
    FOR EACH ROW EXECUTE FUNCTION stamp_indexed_at();
"""


def psql(run_dir: Path, *args: str, stdin: str | None = None) -> str:
    cmd = [str(LOCAL_POSTGRES), "psql", "--dir", str(run_dir), "--", "-q", *args]
    result = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        sys.exit(f"psql failed: {result.stderr[-2000:]}")
    return result.stdout


def rows_of(run_dir: Path, select: str) -> list[dict[str, Any]]:
    wrapped = f"SELECT coalesce(json_agg(q), '[]'::json) FROM ({select}) q"
    rows: list[dict[str, Any]] = json.loads(psql(run_dir, "-At", "-c", wrapped))
    return rows


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def corpus_rows(count: int) -> list[str]:
    """Groups of whole paragraphs up to ROW_CHARS, repeated until there are ``count``."""
    groups: list[str] = []
    for doc in gather(min_chars=400):
        current: list[str] = []
        for paragraph in doc.text.split("\n\n"):
            if current and sum(len(p) for p in current) + len(paragraph) > ROW_CHARS:
                groups.append("\n\n".join(current))
                current = []
            current.append(paragraph)
        if current:
            groups.append("\n\n".join(current))
    groups = [g for g in groups if len(g) >= 200]
    return [groups[i % len(groups)] for i in range(count)]


def edited(text: str, n: int) -> str:
    """One sentence rewritten near the middle of the row."""
    at = text.find(". ", len(text) // 2)
    at = len(text) // 2 if at < 0 else at + 2
    end = text.find(". ", at)
    end = len(text) if end < 0 else end + 1
    return f"{text[:at]}This sentence was rewritten by edit {n} of the benchmark.{text[end:]}"


async def worker_done(settings: Settings, rows: int) -> bool:
    """Whether the worker's group has committed the whole input topic, holding every row."""
    end = await kafka_io.end_offsets(settings.bootstrap_servers, settings.input_topic)
    committed = await kafka_io.committed_offsets(settings.bootstrap_servers, settings.group_id)
    return sum(end.values()) >= rows and all(committed.get(tp, -1) >= n for tp, n in end.items())


def best_of(rounds: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times)


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values), q)) if values else float("nan")


def run(args: argparse.Namespace) -> None:
    base = Path(tempfile.mkdtemp(prefix="chunkstream-table-bench."))
    base.chmod(0o755)
    kafka_dir, pg_dir, connect_dir = base / "kafka", base / "postgres", base / "connect"
    pg_dir.mkdir()
    pg_dir.chmod(0o755)
    worker: subprocess.Popen[bytes] | None = None
    try:
        started = subprocess.run(
            [str(LOCAL_KAFKA), "start", "--port", str(free_port()), "--dir", str(kafka_dir)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        bootstrap = started.stdout.strip().splitlines()[-1]
        names = {"input_topic": "documents", "output_topic": "chunks", "dlq_topic": "dlq"}
        overrides: dict[str, Any] = {
            "strategy": args.strategy,
            "encoding": "connect-json",
            "include_embeddings": "true",
            "unchanged_chunks": "skip",
            "input_format": "row",
            "row_text": "body",
            "row_version": "__lsn",
            "row_metadata": "title,__source_ts_ms",
            "commit_interval_ms": "1000",
        }
        if args.retrieval_model_dir:
            overrides["retrieval_model_dir"] = args.retrieval_model_dir
        settings: Settings = kafka_io.make_settings(
            bootstrap, {**names, "group_id": "bench"}, **overrides
        )
        asyncio.run(kafka_io.create(settings))
        pg = subprocess.run(
            [str(LOCAL_POSTGRES), "start", "--port", str(free_port()), "--dir", str(pg_dir)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        jdbc_url = pg.stdout.strip().splitlines()[-1]
        psql(pg_dir, stdin=(CONNECT / "documents.sql").read_text())
        model = load_backend(retrieval_ref(settings))
        dimension = len(model.embed(["dimension"])[0])
        psql(
            pg_dir,
            stdin="DROP INDEX chunks_embedding_hnsw;"
            f"ALTER TABLE chunks ALTER COLUMN embedding TYPE vector({dimension});"
            "CREATE INDEX chunks_embedding_hnsw ON chunks USING hnsw "
            "(embedding vector_cosine_ops);" + STAMP_SQL,
        )
        texts = corpus_rows(args.rows)
        ids = [f"row/{n:06d}" for n in range(args.rows)]
        for start in range(0, args.rows, 1000):
            values = ",".join(
                f"({literal(i)}, {literal('Row ' + i)}, {literal(t)})"
                for i, t in zip(ids[start : start + 1000], texts[start : start + 1000], strict=True)
            )
            psql(pg_dir, stdin=f"INSERT INTO documents (id, title, body) VALUES {values};")

        built = kafka_io.build_as_worker(settings)
        label = retrieval_ref(settings).label

        def chunk_texts(text: str) -> list[str]:
            return [c.text for c in chunk_document_sync(built, text, "text/plain", None)]

        def ids_of(doc_id: str, text: str) -> list[str]:
            return chunk_ids(doc_id, built.fingerprint, chunk_texts(text), label)

        total_chunks = sum(len(chunk_texts(t)) for t in texts)
        log = base / "worker.log"
        worker = kafka_io.worker_process(settings, log)
        subprocess.run(
            [
                str(LOCAL_CONNECT), "start", "--bootstrap-servers", bootstrap,
                "--jdbc-url", jdbc_url, "--rest-port", str(free_port()),
                "--dir", str(connect_dir), "--from-table",
            ],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        # The source is the last connector started: its snapshot begins as it runs.
        t0 = time.monotonic()
        worker_s = None
        while int(psql(pg_dir, "-At", "-c", "SELECT count(*) FROM chunks").strip()) < total_chunks:
            if time.monotonic() - t0 > args.timeout_s:
                sys.exit("the snapshot was not indexed in time")
            if worker_s is None and asyncio.run(worker_done(settings, args.rows)):
                worker_s = time.monotonic() - t0
            time.sleep(1)
        snapshot_s = time.monotonic() - t0
        worker_s = snapshot_s if worker_s is None else worker_s

        # The edit stream: every (1 / share)-th row, paced.
        step = max(1, round(1 / args.edit_share))
        chosen = list(range(0, args.rows, step))
        new_texts = {ids[n]: edited(texts[n], k) for k, n in enumerate(chosen)}
        # One psql session for the whole stream: a process per statement could not keep the
        # pace on a busy machine. Each statement is its own transaction (autocommit).
        session = subprocess.Popen(
            [str(LOCAL_POSTGRES), "psql", "--dir", str(pg_dir), "--", "-q"],
            stdin=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert session.stdin is not None
        t1 = time.monotonic()
        for k, (doc_id, text) in enumerate(new_texts.items()):
            update = f"UPDATE documents SET body = {literal(text)} WHERE id = {literal(doc_id)};"
            session.stdin.write(update + "\n")
            session.stdin.flush()
            pause = t1 + (k + 1) / args.edit_rate - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        session.stdin.close()
        if session.wait(timeout=120) != 0:
            sys.exit("the edit session failed")
        issued_s = time.monotonic() - t1
        want = {doc_id: set(ids_of(doc_id, text)) for doc_id, text in new_texts.items()}
        in_list = ",".join(literal(d) for d in new_texts)
        while True:
            have: dict[str, set[str]] = {}
            for r in rows_of(
                pg_dir, f"SELECT doc_id, chunk_id FROM chunks WHERE doc_id IN ({in_list})"
            ):
                have.setdefault(r["doc_id"], set()).add(r["chunk_id"])
            if have == want:
                break
            if time.monotonic() - t1 > args.timeout_s:
                sys.exit("the edits were not indexed in time")
            time.sleep(1)
        edits_s = time.monotonic() - t1
        # Per edit: its commit time is the newest source.ts_ms among the row's chunks (those
        # the edit wrote; unchanged ones keep the snapshot's), and its chunks landed at the
        # latest stamp among them.
        latencies = [
            float(r["ms"])
            for r in rows_of(
                pg_dir,
                "SELECT doc_id, max(extract(epoch FROM indexed_at) * 1000 - ts) AS ms FROM ("
                "SELECT doc_id, indexed_at, (metadata->>'__source_ts_ms')::float8 AS ts, "
                "max((metadata->>'__source_ts_ms')::float8) OVER (PARTITION BY doc_id) AS newest "
                f"FROM chunks WHERE doc_id IN ({in_list})) c WHERE ts = newest GROUP BY doc_id",
            )
        ]
        old_ids = {ids[n]: set(ids_of(ids[n], texts[n])) for n in chosen}
        new_chunks = [
            text
            for doc_id, text in new_texts.items()
            for chunk_id, text in zip(ids_of(doc_id, text), chunk_texts(text), strict=True)
            if chunk_id not in old_ids[doc_id]
        ]
        whole_rows = [t for text in new_texts.values() for t in chunk_texts(text)]
        # Both embedding bills timed here with the same model, warmed up, best of three.
        model.embed(whole_rows[:64])
        whole_s = best_of(3, lambda: model.embed(whole_rows))
        new_s = best_of(3, lambda: model.embed(new_chunks))
        letters = asyncio.run(kafka_io.dead_letters(bootstrap, settings.dlq_topic))

        edits = len(new_texts)
        per_edit, whole_per_edit = len(new_chunks) / edits, len(whole_rows) / edits
        share, time_ratio = len(new_chunks) / len(whole_rows), new_s / whole_s
        rate = edits / issued_s
        lines = [
            f"table_bench: {args.rows} rows, {total_chunks} chunks (strategy {args.strategy}, "
            f"vectors {label}, dimension {dimension}); {edits} edits at {args.edit_rate}/s; "
            f"{len(letters)} dead letters",
            "",
            "| phase | figure | value |",
            "|---|---|---|",
            f"| snapshot | seconds, the source's start to the last chunk | {snapshot_s:.1f} |",
            f"| snapshot | rows per second | {args.rows / snapshot_s:.0f} |",
            f"| snapshot | chunks embedded per second | {total_chunks / snapshot_s:.0f} |",
            f"| snapshot | seconds until the worker had committed every row | {worker_s:.1f} |",
            f"| snapshot | rows per second through the worker | {args.rows / worker_s:.0f} |",
            f"| edits | edits committed per second (asked {args.edit_rate:g}) | {rate:.1f} |",
            f"| edits | seconds, first commit to the last edit indexed | {edits_s:.1f} |",
            f"| edits | commit → chunks in the index, p50 ms | {percentile(latencies, 50):.0f} |",
            f"| edits | commit → chunks in the index, p99 ms | {percentile(latencies, 99):.0f} |",
            f"| edits | chunks embedded per edit, chunkstream (new ids) | {per_edit:.2f} |",
            f"| edits | chunks embedded per edit, whole row (pgai's way) | {whole_per_edit:.2f} |",
            f"| edits | share of the changed rows' chunks re-embedded | {share:.3f} |",
            f"| edits | embedding time, chunkstream ÷ whole rows (same model) | {time_ratio:.3f} |",
        ]
        print("\n".join(lines))
    finally:
        if worker is not None and worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=60)
        subprocess.run([str(LOCAL_CONNECT), "stop", "--dir", str(connect_dir)])
        subprocess.run([str(LOCAL_POSTGRES), "stop", "--dir", str(pg_dir)])
        subprocess.run([str(LOCAL_KAFKA), "stop", "--dir", str(kafka_dir)])
        shutil.rmtree(base, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--edit-share", type=float, default=0.01)
    parser.add_argument("--edit-rate", type=float, default=5.0, help="edits per second")
    parser.add_argument("--strategy", default="sentence")
    parser.add_argument(
        "--retrieval-model-dir", default=os.environ.get("CHUNKSTREAM_RETRIEVAL_MODEL_DIR")
    )
    parser.add_argument("--timeout-s", type=float, default=3600)
    run(parser.parse_args())


if __name__ == "__main__":
    main()
