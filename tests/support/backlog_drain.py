"""How ``chunkstream_backlog_seconds`` is checked against the measured drain time.

For each configuration (document size × strategy × embeddings on/off), on fresh topics of a
real broker (a private one unless ``--bootstrap``): produce a backlog of documents, start one
worker process with the base's in-flight window (128 KiB / 32 documents) and one inference
thread, let it work until a stated share of the backlog is committed (the warm-up: its cost per
byte is measured on this stream), then read ``sum(chunkstream_backlog_seconds)`` from its
``/metrics`` (the estimate) and measure the wall time from that moment until the group has
committed everything (the drain). A ratio estimate ÷ drain within [0.5, 2] is what KEDA's
threshold in seconds relies on (docs/operating/sizing.md, "Scaling with KEDA").

Documents are slices of the benchmark corpus (tests/support/corpus.py: the installed packages'
descriptions, prose and markdown) cut at whitespace to the target size, each with its own id.
tests/broker/test_backlog_estimate.py runs two rows of this on the session broker;
``.venv/bin/python -m bench.calibration.backlog`` runs them all and prints the table.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
import time
import urllib.request
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.support import kafka_io
from tests.support.corpus import gather
from tests.support.network import free_port
from worker.wire.events import DocumentEvent

KiB = 1024
MiB = 1024 * KiB


@dataclass(frozen=True)
class Case:
    name: str
    doc_bytes: int
    documents: int  # sized for a drain of about a minute on the 2-core development machine
    strategy: str = "sentence"
    include_embeddings: bool = False


CASES = {
    c.name: c
    for c in (
        Case("1KB-sentence", 1 * KiB, 20_000),
        Case("64KB-sentence", 64 * KiB, 1_200),
        Case("1MiB-sentence", 1 * MiB, 120),
        Case("1KB-lexical", 1 * KiB, 20_000, "lexical"),
        Case("1MiB-lexical", 1 * MiB, 120, "lexical"),
        Case("1KB-semantic", 1 * KiB, 8_000, "semantic"),
        Case("64KB-semantic", 64 * KiB, 400, "semantic"),
        Case("1MiB-semantic", 1 * MiB, 30, "semantic"),
        Case("1KB-semantic-embeddings", 1 * KiB, 1_500, "semantic", True),
        Case("64KB-semantic-embeddings", 64 * KiB, 25, "semantic", True),
    )
}


@dataclass(frozen=True)
class Result:
    case: Case
    backlog_documents: int  # not yet committed when the estimate was read
    estimate_s: float
    drain_s: float
    seconds_per_byte: float
    warmup_s: float

    @property
    def ratio(self) -> float:
        return self.estimate_s / self.drain_s


def documents(size: int, count: int, seed: int) -> list[DocumentEvent]:
    """``count`` documents of about ``size`` bytes: corpus slices cut at whitespace."""
    corpus = "\n\n".join(d.text for d in gather())
    while len(corpus.encode()) < 2 * size:
        corpus += "\n\n" + corpus
    rng = random.Random(seed)
    run = uuid.uuid4().hex[:6]
    out = []
    for n in range(count):
        start = rng.randrange(0, len(corpus) - size)
        start = corpus.find(" ", start) + 1
        text = corpus[start : start + size]
        text = text.encode()[:size].decode(errors="ignore")
        text = text[: text.rfind(" ")] if " " in text else text
        out.append(DocumentEvent(id=f"cal-{run}-{n}", text=text))
    return out


def scrape_backlog(port: int) -> tuple[float | None, float | None]:
    """(sum of chunkstream_backlog_seconds, chunkstream_processing_seconds_per_input_byte)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    backlog: float | None = None
    per_byte: float | None = None
    for line in text.splitlines():
        if line.startswith("chunkstream_backlog_seconds{"):
            backlog = (backlog or 0.0) + float(line.rsplit(" ", 1)[1])
        elif line.startswith("chunkstream_processing_seconds_per_input_byte "):
            per_byte = float(line.rsplit(" ", 1)[1])
    return backlog, per_byte


async def committed(bootstrap: str, group: str) -> int:
    return sum((await kafka_io.committed_offsets(bootstrap, group)).values())


async def calibrate(
    bootstrap: str,
    case: Case,
    workdir: Path,
    *,
    warmup_share: float = 0.3,
    documents_override: int | None = None,
    timeout_s: float = 900,
) -> Result:
    """One row: produce the backlog, warm up on it, read the estimate, measure the drain."""
    count = documents_override or case.documents
    suffix = uuid.uuid4().hex[:8]
    names = {
        "input_topic": f"cal-in-{suffix}",
        "output_topic": f"cal-out-{suffix}",
        "dlq_topic": f"cal-dlq-{suffix}",
        "group_id": f"cal-{suffix}",
    }
    port = free_port()
    settings = kafka_io.make_settings(
        bootstrap,
        names,
        strategy=case.strategy,
        include_embeddings=str(case.include_embeddings).lower(),
        max_in_flight_bytes="131072",
        max_in_flight_documents="32",
        inference_threads="1",
        concurrent_batches="1",
        metrics_host="127.0.0.1",
        metrics_port=str(port),
        commit_interval_ms="500",
    )
    await kafka_io.create(settings, partitions=3)
    docs = documents(case.doc_bytes, count, seed=len(case.name))
    records = kafka_io.encode_documents(docs)
    for start in range(0, len(records), 200 if case.doc_bytes < 64 * KiB else 20):
        step = 200 if case.doc_bytes < 64 * KiB else 20
        await kafka_io.produce_raw(bootstrap, settings.input_topic, records[start : start + step])
    log = workdir / f"worker-{suffix}.log"
    proc = kafka_io.worker_process(settings, log)
    try:
        began = time.monotonic()
        deadline = began + timeout_s
        while await committed(bootstrap, settings.group_id) < warmup_share * count:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{case.name}: the worker did not warm up (log: {log})")
            await asyncio.sleep(0.05)
        estimate, per_byte = await asyncio.to_thread(scrape_backlog, port)
        read_at = time.monotonic()
        left = count - await committed(bootstrap, settings.group_id)
        if estimate is None or per_byte is None:
            raise RuntimeError(f"{case.name}: no estimate exported after the warm-up")
        while await committed(bootstrap, settings.group_id) < count:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{case.name}: the backlog did not drain (log: {log})")
            await asyncio.sleep(0.05)
        drained = time.monotonic()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(Exception):
                await asyncio.to_thread(proc.wait, 60)
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    return Result(case, left, estimate, drained - read_at, per_byte, read_at - began)


def table(results: Sequence[Result]) -> str:
    rows = [
        "| documents | strategy | embeddings | backlog at the reading | estimate s | drain s "
        "| estimate ÷ drain | seconds per input byte | warm-up s |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        c = r.case
        size = f"{c.doc_bytes // MiB} MiB" if c.doc_bytes >= MiB else f"{c.doc_bytes // KiB} KB"
        rows.append(
            f"| {size} | {c.strategy} | {'on' if c.include_embeddings else 'off'} "
            f"| {r.backlog_documents:,} | {r.estimate_s:.1f} | {r.drain_s:.1f} | {r.ratio:.2f} "
            f"| {r.seconds_per_byte:.3g} | {r.warmup_s:.1f} |"
        )
    return "\n".join(rows)
