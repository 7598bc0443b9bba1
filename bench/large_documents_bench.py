"""Large documents through the worker with the default settings, on a real broker.

For each size (``--mb``, default 5 and 10), one document of real text of that size goes through
``chunkstream run`` as a real process with the defaults (``sentence``, 10 MiB documents, 1 MiB
records, the lifecycle on), every topic but the input at the broker's default
``max.message.bytes``. Then, as the baseline in the same run, the same text cut at paragraph
breaks into documents of about 100 KB goes through a fresh worker process. Printed per size:
the chunk events and state records produced, the seconds from producing the input until the
group committed it, the worker's peak resident memory (``VmHWM`` of its process), and the large
document's figures as ratios to the baseline's.

The text (``--text``): ``python-manual`` (default), the reStructuredText sources of the Python
3.11 manual from Debian's ``python3.11-doc`` package (fetched once with ``apt-get download``
into ``.cache/corpus``: tests/support/corpus.py), pages in a stable order, or
``stdlib-sources``, the standard library's own modules (nothing to fetch).

    .venv/bin/python -m bench.large_documents_bench [--mb 5 10] [--text python-manual]
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from aiokafka import AIOKafkaProducer

from bench.support.kafka_runs import REPO, start_broker
from tests.support import kafka_io
from tests.support.big_text import stdlib_sources
from tests.support.corpus import debian_docs
from worker.config import Settings, chunk_cap, load_settings, state_topic
from worker.kafka.clients import create_topics, worker_topics
from worker.wire.codec import EventEncoder
from worker.wire.events import DocumentEvent

BASELINE_BYTES = 100_000
# Where tests/support/corpus.py keeps the Debian documentation it fetches (shared with the other
# benches' --corpus debian-docs).
DEBIAN_CACHE = REPO / ".cache" / "corpus" / "debian-docs"


@dataclass(frozen=True)
class Run:
    documents: int
    input_bytes: int
    chunk_records: int
    state_records: int
    dead_letters: int
    seconds: float
    peak_rss_mb: float
    idle_rss_mb: float


def real_text(name: str, size: int) -> str:
    """``size`` bytes of the chosen text at most, cut at a paragraph break."""
    if name == "stdlib-sources":
        text = stdlib_sources(size + 100_000)
    else:
        pages = debian_docs(DEBIAN_CACHE, ("python3.11-doc",))
        text = "\n\n".join(page.text.strip() for page in pages)
    data = text.encode()
    if len(data) < size:
        raise SystemExit(f"--text {name} holds {len(data)} bytes, fewer than {size}")
    cut = data[:size].decode(errors="ignore")
    return cut[: cut.rfind("\n\n")]


def split(text: str, size: int) -> list[str]:
    """``text`` as documents of about ``size`` bytes, cut at paragraph breaks."""
    out: list[str] = []
    current: list[str] = []
    length = 0
    for paragraph in text.split("\n\n"):
        current.append(paragraph)
        length += len(paragraph.encode()) + 2
        if length >= size:
            out.append("\n\n".join(current))
            current, length = [], 0
    if current:
        out.append("\n\n".join(current))
    return out


def rss_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


async def one_run(bootstrap: str, texts: list[str], work: Path) -> Run:
    suffix = uuid.uuid4().hex[:8]
    # The defaults, but for where the worker finds its broker and topics.
    settings: Settings = load_settings(
        {
            "bootstrap_servers": bootstrap,
            "input_topic": f"documents-{suffix}",
            "output_topic": f"chunks-{suffix}",
            "dlq_topic": f"dlq-{suffix}",
            "group_id": f"group-{suffix}",
            "metrics_port": "0",
        },
        env={},
    )
    topics, configs = worker_topics(settings, 1)
    configs.setdefault(settings.input_topic, {})["max.message.bytes"] = str(16 * 2**20)
    await create_topics(settings, topics, configs=configs)
    log = work / f"worker-{suffix}.log"
    proc = kafka_io.worker_process(settings, log)
    try:
        await kafka_io.wait_for_log(log, "state restored", timeout_s=120)
        idle = rss_mb(proc.pid, "VmRSS")
        encoder = EventEncoder("msgpack")
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, acks="all", max_request_size=16 * 2**20
        )
        await producer.start()
        started = time.perf_counter()
        try:
            for n, text in enumerate(texts):
                doc_id = f"doc-{n}"
                value = encoder.encode(DocumentEvent(id=doc_id, text=text))
                await producer.send(settings.input_topic, value, key=doc_id.encode())
            await producer.flush()
        finally:
            await producer.stop()
        await kafka_io.wait_committed_to_end(
            bootstrap, settings.group_id, settings.input_topic, timeout_s=900
        )
        seconds = time.perf_counter() - started
        peak = rss_mb(proc.pid, "VmHWM")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)

    async def records(topic: str) -> int:
        return sum((await kafka_io.end_offsets(bootstrap, topic)).values())

    return Run(
        documents=len(texts),
        input_bytes=sum(len(t.encode()) for t in texts),
        chunk_records=await records(settings.output_topic),
        state_records=await records(state_topic(settings)),
        dead_letters=await records(settings.dlq_topic),
        seconds=seconds,
        peak_rss_mb=peak,
        idle_rss_mb=idle,
    )


def table(rows: list[tuple[int, Run, Run]]) -> str:
    lines = [
        "| document | chunk events | state records | dead letters | seconds to commit "
        "| ÷ baseline | peak RSS MB (idle) | ÷ baseline |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for mb, large, base in rows:
        for label, run in ((f"one of {mb} MB", large), (f"baseline: {run_label(base)}", base)):
            ratio_s = f"{run.seconds / base.seconds:.2f}" if run is large else "1"
            ratio_m = f"{run.peak_rss_mb / base.peak_rss_mb:.2f}" if run is large else "1"
            lines.append(
                f"| {label} ({run.input_bytes / 1e6:.2f} MB) | {run.chunk_records:,} "
                f"| {run.state_records:,} | {run.dead_letters} | {run.seconds:.1f} | {ratio_s} "
                f"| {run.peak_rss_mb:.0f} ({run.idle_rss_mb:.0f}) | {ratio_m} |"
            )
    return "\n".join(lines)


def run_label(run: Run) -> str:
    return f"{run.documents} documents of ~{BASELINE_BYTES // 1000} KB"


async def runs(args: argparse.Namespace, bootstrap: str, work: Path) -> list[tuple[int, Run, Run]]:
    rows = []
    for mb in args.mb:
        text = real_text(args.text, int(mb * 1_000_000))
        large = await one_run(bootstrap, [text], work)
        base = await one_run(bootstrap, split(text, BASELINE_BYTES), work)
        rows.append((mb, large, base))
        print(table(rows[-1:]), flush=True)
    return rows


def main(args: argparse.Namespace) -> None:
    defaults = load_settings({}, env={})
    cap, setting = chunk_cap(defaults)
    print(f"chunk cap with the defaults: {cap:,} ({setting}); text: {args.text}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        bootstrap = start_broker(work / "kafka")
        try:
            rows = asyncio.run(runs(args, bootstrap, work))
        finally:
            local_kafka = str(REPO / "deploy/kafka/local-kafka")
            subprocess.run([local_kafka, "stop", "--dir", str(work / "kafka")], timeout=120)
    print()
    print(table(rows))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, nargs="+", default=[5, 10], help="document sizes")
    parser.add_argument(
        "--text", choices=["python-manual", "stdlib-sources"], default="python-manual"
    )
    return parser.parse_args()


if __name__ == "__main__":
    main(parse_args())
