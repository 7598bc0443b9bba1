"""How much the pgvector recipe's HNSW index misses, against an exact scan, per ``hnsw.ef_search``.

    .venv/bin/python -m bench.pgvector_recall_bench [--rows 3300] [--builds 5]
        [--ef-search 40 64 100 200 400] [--strategy sentence]

The table is the recipe's own (deploy/connect/local-postgres starts PostgreSQL with pgvector
and runs deploy/connect/schema.sql: ``vector(384)``, an HNSW index with pgvector's default
build parameters for cosine distance). Its rows: the chunks of the demo's examples and of
QuAC's documents (bench/support/qa_dataset.py; ``report``, then ``tune``) until ``--rows`` is
reached, chunked by ``--strategy`` at its defaults through the worker's pipeline and embedded by
the worker's retrieval model (what ``CHUNKSTREAM_INCLUDE_EMBEDDINGS`` sends). They are inserted
with the index in place, in document order, as the sink inserts them, so the graph is built one
insert at a time. The graph depends on random level draws, so the table is emptied and loaded again
``--builds`` times.

The questions: every question of the QuAC documents in the table, and the demo's and the
sink test's three questions about the examples. Each is asked as the demo asks
(``ORDER BY embedding <=> q LIMIT``), through psql, at each ``hnsw.ef_search`` and as an exact
scan (``enable_indexscan = off``: a sequential scan and a sort). Each ``hnsw.ef_search`` is
asked twice: as set, where the planner may prefer scanning the table (its cost estimate of the
index grows with ``ef_search``), and with the index forced (``enable_seqscan = off``), which
measures the index itself. Per setting:

* scan: what the plan used (``EXPLAIN`` of the first question, per build);
* recall@3 and recall@10: the share of the exact scan's 3 (10) nearest that the index returns
  among its 3 (10), averaged over questions and builds;
* top-1 missed: questions × builds whose nearest chunk by the exact scan is not in the index's
  first 3 (the demo shows 3 rows): the failure the issue reported;
* the examples' answers: of the three example questions × builds, how often the chunk holding
  the answer phrase is in the first 3;
* ms per question (the whole statement through psql, parse and plan included), and its ratio
  to the exact scan's in the same build.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import io
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from bench.support import qa_dataset
from bench.support.retrieval_chunkers import make
from bench.support.retrieval_runtime import batchers, resolve_models
from tests.support.network import free_port

REPO = Path(__file__).resolve().parent.parent
LOCAL_POSTGRES = REPO / "deploy" / "connect" / "local-postgres"
EXAMPLES = REPO / "examples"
DEPTH = 10
SHOWN = 3  # rows the demo prints
# (question, example file, a phrase of its answer): the demo's question and the sink test's.
EXAMPLE_QUESTIONS = [
    (
        "How can a pod restart without triggering a consumer group rebalance?",
        "kafka-consumer-groups.md",
        "Static membership avoids a rebalance",
    ),
    (
        "Why should a chunker never split a code block?",
        "retrieval-notes.txt",
        "half a function is useless",
    ),
    (
        "How long did reviewers take to find the source of an answer with exact offsets?",
        "retrieval-notes.txt",
        "3.5 seconds on average",
    ),
]
COLUMNS = (
    "chunk_id, doc_id, index, count, text, start_index, end_index, token_count, strategy, "
    "metadata, source_topic, source_partition, source_offset, produced_at, schema_version, "
    "embedding"
)


@dataclass
class Row:
    doc_id: str
    index: int
    text: str
    start: int
    end: int


@dataclass
class Tally:
    """One setting's results, summed over builds."""

    recall_shown: list[float] = field(default_factory=list)
    recall_depth: list[float] = field(default_factory=list)
    top1_missed: int = 0
    answers_found: int = 0
    asked: int = 0
    seconds_per_question: list[float] = field(default_factory=list)
    scans: set[str] = field(default_factory=set)  # the plan's scan node, per build


class Server:
    """The recipe's PostgreSQL on a free port, in a directory the server's user can enter."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="chunkstream-pgvector-bench-"))
        self.dir.chmod(0o755)
        started = subprocess.run(
            [str(LOCAL_POSTGRES), "start", "--port", str(free_port()), "--dir", str(self.dir)],
            capture_output=True,
            text=True,
        )
        if started.returncode != 0:
            raise SystemExit(f"local-postgres start failed:\n{started.stderr}")

    def psql(self, *args: str, script: str | None = None) -> str:
        result = subprocess.run(
            [str(LOCAL_POSTGRES), "psql", "--dir", str(self.dir), "--", "-q", "-At", *args],
            input=script,
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise SystemExit(f"psql failed: {result.stderr[-2000:]}")
        return result.stdout

    def stop(self) -> None:
        subprocess.run([str(LOCAL_POSTGRES), "stop", "--dir", str(self.dir)], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


def literal(vector: NDArray[np.float32]) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


def copy_data(rows: Sequence[Row], vectors: NDArray[np.float32]) -> str:
    """The rows as CSV for COPY, with placeholders where the sink would write the source record
    and the time (nothing here reads them)."""
    out = io.StringIO()
    writer = csv.writer(out)
    for n, (row, vector) in enumerate(zip(rows, vectors, strict=True)):
        writer.writerow(
            [n, row.doc_id, row.index, 0, row.text, row.start, row.end, 0, "bench", "{}",
             "bench", 0, n, "2026-12-06T00:00:00Z", 1, literal(vector)]
        )  # fmt: skip
    return out.getvalue()


def ask(
    server: Server, setting: str, questions: NDArray[np.float32]
) -> tuple[list[list[int]], float]:
    """The ids of the ``DEPTH`` nearest rows per question under ``setting`` (SQL run first in the
    same session), and the seconds the whole run took."""
    lines = [setting]
    for vector in questions:
        lines.append(
            "SELECT array_to_string(ARRAY(SELECT chunk_id FROM chunks "
            f"ORDER BY embedding <=> '{literal(vector)}'::vector LIMIT {DEPTH}), ',');"
        )
    began = time.perf_counter()
    out = server.psql("-f", "-", script="\n".join(lines) + "\n")
    elapsed = time.perf_counter() - began
    ranked = [[int(x) for x in line.split(",")] for line in out.splitlines()]
    assert len(ranked) == len(questions), (len(ranked), len(questions))
    return ranked, elapsed


def plan_node(server: Server, setting: str, vector: NDArray[np.float32]) -> str:
    """The scan the planner picks under ``setting`` (so the comparison is what it claims)."""
    out = server.psql(
        "-c",
        f"{setting} EXPLAIN (COSTS OFF) SELECT chunk_id FROM chunks "
        f"ORDER BY embedding <=> '{literal(vector)}'::vector LIMIT {DEPTH}",
    )
    node = next(line.strip(" ->") for line in out.splitlines() if "Scan" in line)
    hnsw = node.startswith("Index Scan using chunks_embedding_hnsw")
    return "HNSW index" if hnsw else node.split(" on ")[0].lower()


@dataclass
class Corpus:
    rows: list[Row]
    vectors: NDArray[np.float32]
    questions: list[str]
    question_vectors: NDArray[np.float32]
    answers: list[int]  # per example question, the row holding its answer


async def corpus(rows_wanted: int, strategy: str) -> Corpus:
    """The table's rows and vectors, the questions and theirs, as the worker would make them."""
    models = resolve_models(None, None)
    docs = [
        (f"examples/{p.name}", p.read_text(encoding="utf-8")) for p in sorted(EXAMPLES.iterdir())
    ]
    rows: list[Row] = []
    questions = [q for q, _, _ in EXAMPLE_QUESTIONS]
    async with batchers(models) as (boundary, retrieval):
        chunker = make(strategy, models.context, models.boundary_dir, boundary.submit)
        for doc_id, text in docs:
            for n, piece in enumerate(await chunker.run(text)):
                rows.append(Row(doc_id, n, piece.text, *piece.ranges[0]))
        # The report split first, then tune for tables larger than it makes.
        for doc in [*qa_dataset.load("report"), *qa_dataset.load("tune")]:
            if len(rows) >= rows_wanted:
                break
            for n, piece in enumerate(await chunker.run(doc.text)):
                rows.append(Row(doc.doc_id, n, piece.text, *piece.ranges[0]))
            questions += [q.text for q in doc.questions]
        vectors = await retrieval.submit([r.text for r in rows])
        question_vectors = await retrieval.submit(questions)
    answers = []
    for _, name, phrase in EXAMPLE_QUESTIONS:
        at = (EXAMPLES / name).read_text(encoding="utf-8").index(phrase)
        holding = [
            n
            for n, r in enumerate(rows)
            if r.doc_id == f"examples/{name}" and r.start <= at < r.end
        ]
        answers.append(holding[0])
    return Corpus(rows, vectors, questions, question_vectors, answers)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=3300)
    parser.add_argument("--builds", type=int, default=5)
    parser.add_argument("--ef-search", type=int, nargs="+", default=[40, 64, 100, 200, 400])
    parser.add_argument("--strategy", default="sentence")
    args = parser.parse_args()

    made = asyncio.run(corpus(args.rows, args.strategy))
    rows, questions, question_vectors = made.rows, made.questions, made.question_vectors
    print(
        f"{len(rows)} rows ({len({r.doc_id for r in rows})} documents, {args.strategy}), "
        f"{len(questions)} questions, {args.builds} builds",
        flush=True,
    )
    exact = "SET enable_indexscan = off;"
    settings = {}
    for ef in args.ef_search:
        settings[f"ef_search {ef}"] = f"SET hnsw.ef_search = {ef};"
        # The index's own recall, where the planner would have scanned the table instead.
        settings[f"ef_search {ef}, index forced"] = (
            f"SET hnsw.ef_search = {ef}; SET enable_seqscan = off;"
        )
    settings["exact scan"] = exact
    tallies = {name: Tally() for name in settings}
    data = copy_data(rows, made.vectors)
    server = Server()
    try:
        for build in range(args.builds):
            server.psql("-c", "TRUNCATE chunks")
            server.psql(
                "-c", f"\\copy chunks ({COLUMNS}) FROM pstdin WITH (FORMAT csv)", script=data
            )
            server.psql("-c", "ANALYZE chunks")
            for name, setting in settings.items():
                tallies[name].scans.add(plan_node(server, setting, question_vectors[0]))
            truth, _ = ask(server, exact, question_vectors)
            for name, setting in settings.items():
                ranked, seconds = ask(server, setting, question_vectors)
                tally = tallies[name]
                tally.seconds_per_question.append(seconds / len(questions))
                for got, want in zip(ranked, truth, strict=True):
                    tally.recall_shown.append(len(set(got[:SHOWN]) & set(want[:SHOWN])) / SHOWN)
                    tally.recall_depth.append(len(set(got) & set(want)) / DEPTH)
                    tally.top1_missed += want[0] not in got[:SHOWN]
                for n, answer in enumerate(made.answers):
                    tally.answers_found += answer in ranked[n][:SHOWN]
                    tally.asked += 1
            print(f"  build {build + 1} of {args.builds} done", flush=True)
    finally:
        server.stop()

    exact_s = float(np.mean(tallies["exact scan"].seconds_per_question))
    total = len(questions) * args.builds
    print()
    print(
        f"| setting | scan | recall@{SHOWN} | recall@{DEPTH} | top-1 missed from the first {SHOWN} "
        f"| the examples' answers in the first {SHOWN} | ms per question | ÷ exact scan |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name, t in tallies.items():
        per_q = float(np.mean(t.seconds_per_question))
        print(
            f"| {name} | {' / '.join(sorted(t.scans))} | "
            f"{np.mean(t.recall_shown):.4f} | {np.mean(t.recall_depth):.4f} | "
            f"{t.top1_missed} of {total} ({t.top1_missed / total:.2%}) | "
            f"{t.answers_found} of {t.asked} | {per_q * 1000:.2f} | {per_q / exact_s:.2f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
