"""`scripts/demo --from-table`: a table of documents kept equal to an index of its chunks with
no code of the user's in between (docs/operating/from-a-table.md).

PostgreSQL holds a `documents` table (deploy/connect/documents.sql) filled with examples/;
Kafka Connect runs Debezium's PostgreSQL source (deploy/connect/documents-debezium.json) and the
JDBC sink; the worker reads the rows with the row mapping and writes chunks with their vectors.
After the initial snapshot, an insert, an update, a title-only update and a delete, the demo
shows the chunk table beside chunking the table's current rows directly (they must be equal:
the demo fails otherwise), then answers a question from the live index.

Run by scripts/demo after it installed what is needed; it starts and stops everything itself.
Environment: DEMO_KAFKA_PORT, DEMO_POSTGRES_PORT, DEMO_CONNECT_PORT, DEMO_RUN_DIR,
DEMO_QUESTION.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from worker.config import Settings, load_settings  # noqa: E402
from worker.wire.records import chunk_ids  # noqa: E402

CONNECT = REPO / "deploy" / "connect"
LOCAL_KAFKA = REPO / "deploy" / "kafka" / "local-kafka"
LOCAL_POSTGRES = CONNECT / "local-postgres"
LOCAL_CONNECT = CONNECT / "local-connect"
CHUNKSTREAM = [sys.executable, "-m", "worker.cli"]
# The row mapping of documents.sql's table, as a user would set it.
WORKER_ENV = {
    "CHUNKSTREAM_INPUT_FORMAT": "row",
    "CHUNKSTREAM_ROW_TEXT": "body",
    "CHUNKSTREAM_ROW_VERSION": "__lsn",
    "CHUNKSTREAM_ROW_CONTENT_TYPE": "content_type",
    "CHUNKSTREAM_ROW_METADATA": "title",
    "CHUNKSTREAM_ENCODING": "connect-json",
    "CHUNKSTREAM_INCLUDE_EMBEDDINGS": "true",
}
NEW_ROW = (
    "Change data capture turns every committed insert, update and delete of a table into an "
    "event, in commit order. A connector reads the database's write-ahead log through a "
    "replication slot, so the table's writers do nothing extra.\n\n"
    "An index fed this way is never rebuilt: each change re-chunks one row, and only the "
    "chunks whose text changed need new vectors."
)


def say(text: str) -> None:
    print(text, flush=True)


def run(cmd: list[str], **kwargs: Any) -> str:
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, **kwargs)
    if result.returncode != 0:
        sys.exit(f"demo: `{' '.join(cmd)}` failed:\n{result.stdout[-2000:]}{result.stderr[-3000:]}")
    return str(result.stdout)


class Table:
    """psql on the demo's server."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir

    def sql(self, statements: str) -> None:
        cmd = [str(LOCAL_POSTGRES), "psql", "--dir", str(self.run_dir), "--", "-q"]
        run(cmd, input=statements)

    def rows(self, select: str, setup: str = "") -> list[dict[str, Any]]:
        """The rows of ``select`` as JSON objects, ``setup`` run first in the same session."""
        wrapped = f"{setup}SELECT coalesce(json_agg(q), '[]'::json) FROM ({select}) q"
        cmd = [str(LOCAL_POSTGRES), "psql", "--dir", str(self.run_dir), "--", "-q", "-At"]
        cmd += ["-c", wrapped]
        rows: list[dict[str, Any]] = json.loads(run(cmd))
        return rows


def title_of(text: str) -> str:
    """A front matter's `title:`, else the first heading or line."""
    lines = [line.strip() for line in text.splitlines() if line.strip() not in ("", "---")]
    for line in lines:
        if line.startswith("title:"):
            return line.removeprefix("title:").strip()
    return lines[0].lstrip("# ")[:60]


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def direct_chunking(table: Table, settings: Settings) -> dict[str, set[str]]:
    """Each current row's chunk ids, chunking its text here, as the worker would."""
    from worker.inference.serving import retrieval_ref
    from worker.pipeline import chunk_document_sync

    built = _built(settings)
    label = retrieval_ref(settings).label
    out: dict[str, set[str]] = {}
    for row in table.rows("SELECT id, body, content_type FROM documents"):
        chunks = chunk_document_sync(built, row["body"], row["content_type"], None)
        out[row["id"]] = set(
            chunk_ids(row["id"], built.fingerprint, [c.text for c in chunks], label)
        )
    return out


def _built(settings: Settings) -> Any:
    """The strategy as the worker builds it (the same model references, so the same ids)."""
    from worker.chunking import registry
    from worker.inference.serving import resolve

    needs = registry.get(settings.strategy).needs_model
    refs = resolve(settings, boundary=needs, retrieval=False)
    context = registry.BuildContext(boundary=refs.boundary, retrieval=refs.retrieval)
    return registry.build(settings.strategy, settings.strategy_params, context)


def show(step: str, table: Table, settings: Settings) -> None:
    """Wait until the chunk table equals chunking the current rows (the same chunk ids, and
    each row's title in its chunks' metadata); print both side by side. The title is compared
    too: a title-only update keeps every chunk id, so the ids alone would not wait for it."""
    want = direct_chunking(table, settings)
    titles = {r["id"]: r["title"] for r in table.rows("SELECT id, title FROM documents")}
    want_titles = {doc_id: {titles[doc_id]} for doc_id in want}
    deadline = time.monotonic() + 180
    while True:
        have: dict[str, set[str]] = {}
        have_titles: dict[str, set[str | None]] = {}
        chunks = table.rows("SELECT doc_id, chunk_id, metadata->>'title' AS title FROM chunks")
        for r in chunks:
            have.setdefault(r["doc_id"], set()).add(r["chunk_id"])
            have_titles.setdefault(r["doc_id"], set()).add(r["title"])
        if have == want and have_titles == want_titles:
            break
        if time.monotonic() > deadline:
            sys.exit(f"demo: after {step} the chunk table does not equal chunking the rows")
        time.sleep(1)
    say(f"== after {step}: the chunk table equals chunking the table's current rows")
    say(f"   {'row (id)':40} {'title':28} {'in the index':>12} {'chunked here':>12}")
    for doc_id in sorted(want):
        say(
            f"   {doc_id:40} {titles[doc_id][:28]:28} "
            f"{len(have[doc_id]):>12} {len(want[doc_id]):>12}"
        )
    total = sum(len(ids) for ids in want.values())
    say(f"   {len(want)} rows, {total} chunks: the same chunk ids on both sides")


def main() -> None:
    kafka_port = os.environ.get("DEMO_KAFKA_PORT", "39092")
    run_dir = Path(os.environ.get("DEMO_RUN_DIR", REPO / ".cache" / "kafka" / "demo"))
    bootstrap = f"127.0.0.1:{kafka_port}"
    run([str(LOCAL_KAFKA), "stop", "--dir", str(run_dir)])
    shutil.rmtree(run_dir, ignore_errors=True)
    # Outside the checkout: as root the server runs as the postgres user, who must be able to
    # enter its data directory.
    pg_dir = Path(tempfile.mkdtemp(prefix="chunkstream-demo-postgres."))
    pg_dir.chmod(0o755)
    connect_dir = run_dir / "connect"
    worker: subprocess.Popen[bytes] | None = None
    try:
        say(f"== starting Kafka on {bootstrap}, PostgreSQL with pgvector, Kafka Connect")
        run([str(LOCAL_KAFKA), "start", "--port", kafka_port, "--dir", str(run_dir)])
        run([*CHUNKSTREAM, "topics", "--bootstrap-servers", bootstrap, "--partitions", "3"])
        postgres_port = os.environ.get("DEMO_POSTGRES_PORT", "55432")
        start = [str(LOCAL_POSTGRES), "start", "--port", postgres_port, "--dir", str(pg_dir)]
        jdbc_url = run(start).strip().splitlines()[-1]
        table = Table(pg_dir)
        table.sql((CONNECT / "documents.sql").read_text())
        say("== a table of documents before any connector runs: examples/, one row each")
        values = []
        for path in sorted((REPO / "examples").iterdir()):
            text = path.read_text(encoding="utf-8")
            title = title_of(text)
            ctype = "text/markdown" if path.suffix == ".md" else "text/plain"
            values.append(
                f"({literal('examples/' + path.name)}, {literal(title)}, {literal(text)}, "
                f"{literal(ctype)})"
            )
        table.sql(
            "INSERT INTO documents (id, title, body, content_type) VALUES " + ",".join(values)
        )
        connect_port = os.environ.get("DEMO_CONNECT_PORT", "18083")
        run([
            str(LOCAL_CONNECT), "start", "--bootstrap-servers", bootstrap, "--jdbc-url", jdbc_url,
            "--rest-port", connect_port, "--dir", str(connect_dir), "--from-table",
        ])  # fmt: skip
        say("   Debezium's PostgreSQL source and the JDBC sink RUNNING on one Connect worker")
        env = {k: v for k, v in os.environ.items() if not k.startswith("CHUNKSTREAM_")}
        env.update(WORKER_ENV)
        settings = load_settings({"bootstrap_servers": bootstrap}, env=env)
        say("== starting the worker: " + " ".join(f"{k}={v}" for k, v in WORKER_ENV.items()))
        log = run_dir / "worker.log"
        with log.open("ab") as out:
            worker = subprocess.Popen(
                [*CHUNKSTREAM, "run", "--bootstrap-servers", bootstrap, "--metrics-port", "0"],
                env={**env, "PYTHONPATH": str(REPO)},
                cwd=REPO,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        show("the initial snapshot", table, settings)

        say("== INSERT a row")
        table.sql(
            "INSERT INTO documents (id, title, body) VALUES "
            f"('notes/cdc', 'Change data capture', {literal(NEW_ROW)})"
        )
        show("the insert", table, settings)

        say("== UPDATE a row's text (one paragraph rewritten)")
        body = table.rows("SELECT body FROM documents WHERE id = 'examples/retrieval-notes.txt'")
        paragraphs = body[0]["body"].split("\n\n")
        paragraphs[1] = "This paragraph was rewritten in the table: its chunks get new ids."
        text = "\n\n".join(paragraphs)
        table.sql(
            f"UPDATE documents SET body = {literal(text)} WHERE id = 'examples/retrieval-notes.txt'"
        )
        show("the text update", table, settings)

        say("== UPDATE a row's title only (its text unchanged)")
        table.sql("UPDATE documents SET title = 'Notes on CDC' WHERE id = 'notes/cdc'")
        show("the title update", table, settings)
        in_index = table.rows(
            "SELECT DISTINCT metadata->>'title' AS t FROM chunks WHERE doc_id = 'notes/cdc'"
        )
        say(f"   the index's title of notes/cdc: {in_index[0]['t']}")

        say("== DELETE a row")
        table.sql("DELETE FROM documents WHERE id = 'examples/api-reference.md'")
        show("the delete", table, settings)

        question = os.environ.get(
            "DEMO_QUESTION", "How can a pod restart without triggering a consumer group rebalance?"
        )
        say(f"== the nearest chunks to: {question}")
        from worker.inference.serving import retrieval_ref
        from worker.models.loading import load_backend

        vector = load_backend(retrieval_ref(settings)).embed([question])[0]
        literal_vector = "[" + ",".join(repr(float(x)) for x in vector) + "]"
        nearest = table.rows(
            "SELECT doc_id, metadata->>'title' AS title, start_index, end_index, "
            f"round((embedding <=> '{literal_vector}'::vector)::numeric, 3) AS distance, "
            "left(regexp_replace(text, '\\s+', ' ', 'g'), 80) AS text FROM chunks "
            f"ORDER BY embedding <=> '{literal_vector}'::vector LIMIT 3",
            # The recipe's hnsw.ef_search (docs/operating/postgres-pgvector.md).
            setup="SET hnsw.ef_search = 200; ",
        )
        for r in nearest:
            say(
                f"   {r['distance']:.3f}  {r['doc_id']} "
                f"[{r['start_index']}:{r['end_index']}]  {r['text']}"
            )
    finally:
        if worker is not None and worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=60)
        subprocess.run([str(LOCAL_CONNECT), "stop", "--dir", str(connect_dir)], cwd=REPO)
        subprocess.run([str(LOCAL_POSTGRES), "stop", "--dir", str(pg_dir)], cwd=REPO)
        shutil.rmtree(pg_dir, ignore_errors=True)
        subprocess.run([str(LOCAL_KAFKA), "stop", "--dir", str(run_dir)], cwd=REPO)


if __name__ == "__main__":
    main()
