"""What a checkout of chunkstream writes to Kafka for one fixed input, reduced to digests.

Worker-independent on purpose: it imports nothing of ``worker``. It creates the topics, starts
the checkout's own ``python -m worker.cli run`` as a process on a real broker, produces a real
corpus (the pinned wheels' sources and descriptions, the examples) with edits, deletes and bad
records, waits for the group to reach the end, stops the worker with SIGTERM and reads every
topic it wrote: chunk events and tombstones, dead letters, the state changelog and the
documents topic. So the same code can capture an older commit (the golden) and the tree under
test, and the digests say whether the contract moved.

Per topic the records are grouped by partition and document, in the order they were written
(one document's records are ordered; documents of different input partitions interleave on
an output partition by timing), and every byte of key, value and headers counts except the
wall-clock times (``produced_at``, ``failed_at``) and the run's topic-name suffix.

    .venv/bin/python -m tests.contract.capture --tree /path/to/checkout --out golden.json
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import uuid
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / ".cache" / "corpus"
MODELS = REPO / ".cache" / "models"
SUFFIX_LEN = 8
NEUTRAL_SUFFIX = "0" * SUFFIX_LEN
# (strategy, encoding) of every captured run: each strategy once in the default encoding, and
# the JSON encoding once.
RUNS = [(s, "msgpack") for s in ("sentence", "adaptive", "lexical", "semantic", "sdpm", "context")]
RUNS.append(("sentence", "json"))
TIMES = ("produced_at", "failed_at")


@dataclass(frozen=True)
class Document:
    doc_id: str
    text: str
    content_type: str


def corpus(limit_bytes: int = 400_000) -> list[Document]:
    """Real documents of real size, the same on every machine: the examples, the pinned wheels'
    descriptions (reStructuredText read as markdown: headings, lists, code), a spread of their
    Python sources and of Django's translation catalogues (Arabic, Japanese, Russian, German)."""
    docs = [
        Document(
            f"example/{p.name}",
            p.read_text(encoding="utf-8"),
            "text/markdown" if p.suffix == ".md" else "text/plain",
        )
        for p in sorted((REPO / "examples").iterdir())
    ]
    wheels = sorted(CORPUS.glob("*.whl"))
    if len(wheels) != 3:
        raise RuntimeError(f"the pinned corpus is missing in {CORPUS}: run scripts/bootstrap")
    picked: list[Document] = []
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as zf:
            names = sorted(zf.namelist())
            meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
            description = zf.read(meta).decode("utf-8").split("\n\n", 1)[1]
            picked.append(Document(f"{wheel.stem}/description", description, "text/markdown"))
            sources = [n for n in names if n.endswith(".py")]
            for name in sources[:: max(1, len(sources) // 12)]:
                picked.append(Document(name, zf.read(name).decode("utf-8"), "text/plain"))
            for lang in ("ar", "ja", "ru", "de"):
                po = f"django/conf/locale/{lang}/LC_MESSAGES/django.po"
                if po in names:
                    picked.append(Document(po, zf.read(po).decode("utf-8"), "text/plain"))
    total = sum(len(d.text) for d in docs)
    for doc in picked:
        if total + len(doc.text) > limit_bytes:
            continue
        docs.append(doc)
        total += len(doc.text)
    return docs


def edited(text: str) -> str:
    """A second version: the first paragraph gone, one appended (unchanged chunks keep ids)."""
    paragraphs = text.split("\n\n")
    return "\n\n".join([*paragraphs[1:], "An appended closing paragraph of the second version."])


def input_records(docs: list[Document]) -> list[tuple[bytes, bytes | None]]:
    """Version 1 of every document, version 2 of every third, a tombstone of every fifth, and
    two records that are the input's fault (not JSON; no text)."""

    def event(doc: Document, version: int, text: str) -> bytes:
        body = {"id": doc.doc_id, "text": text, "content_type": doc.content_type,
                "version": version, "metadata": {"corpus": "contract"}}  # fmt: skip
        return json.dumps(body, ensure_ascii=False).encode("utf-8")

    records: list[tuple[bytes, bytes | None]] = []
    records += [(d.doc_id.encode(), event(d, 1, d.text)) for d in docs]
    records += [(d.doc_id.encode(), event(d, 2, edited(d.text))) for d in docs[::3]]
    records += [(d.doc_id.encode(), None) for d in docs[1::5]]
    records.append((b"broken/not-json", b"\xff\xfe not an event"))
    records.append((b"broken/no-text", json.dumps({"id": "broken/no-text"}).encode()))
    return records


def _decode(value: bytes, encoding: str) -> Any:
    if encoding == "json":
        return json.loads(value)
    return msgpack.unpackb(value, raw=False, timestamp=0, strict_map_key=False)


def _canonical(obj: Any, encoding: str) -> bytes:
    """A decoded value with its wall-clock times taken out, re-encoded in key order."""
    if isinstance(obj, dict):
        obj = {k: v for k, v in obj.items() if k not in TIMES}
    if encoding == "json":
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
    return bytes(msgpack.packb(obj, use_bin_type=True))


def _owner(value: Any, headers: list[tuple[str, bytes]], key: bytes | None) -> str:
    for name, raw in headers:
        if name == "chunkstream-doc-id":
            return raw.decode()
    if isinstance(value, dict):  # a dead letter may have no document: its source record then
        return str(value.get("doc_id") or value.get("id") or value.get("source") or "")
    return (key or b"").decode(errors="replace")


def digest(records: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes]]]],
           encoding: str, suffix: str, *, timed: bool) -> dict[str, Any]:  # fmt: skip
    groups: dict[tuple[int, str], list[Any]] = {}
    for partition, key, value, headers in records:
        neutral = value.replace(suffix.encode(), NEUTRAL_SUFFIX.encode()) if value else value
        decoded = _decode(neutral, encoding) if (neutral and timed) else None
        canonical = _canonical(decoded, encoding) if (neutral and timed) else neutral
        owner = _owner(decoded, headers, key)
        entry = [
            (key or b"").hex(),
            None if canonical is None else canonical.hex(),
            [(n, v.hex()) for n, v in headers],
        ]
        groups.setdefault((partition, owner), []).append(entry)
    ordered = sorted([p, owner, entries] for (p, owner), entries in groups.items())
    blob = json.dumps(ordered, separators=(",", ":")).encode()
    return {"records": len(records), "sha256": hashlib.sha256(blob).hexdigest()}


async def _read_topic(
    bootstrap: str, topic: str
) -> list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes]]]]:
    # Subscribed without a group: every partition is assigned, nothing is committed.
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, enable_auto_commit=False,
        auto_offset_reset="earliest",
    )  # fmt: skip
    await consumer.start()
    try:
        for _ in range(100):
            partitions = sorted(consumer.assignment(), key=lambda tp: tp.partition)
            if partitions:
                break
            await asyncio.sleep(0.1)
        else:
            raise RuntimeError(f"topic {topic} has no partitions")
        end = await consumer.end_offsets(partitions)
        out: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes]]]] = []
        while [tp for tp in partitions if await consumer.position(tp) < end[tp]]:
            batch = await consumer.getmany(timeout_ms=1000)
            for tp, recs in sorted(batch.items(), key=lambda kv: kv[0].partition):
                for r in recs:
                    if r.offset < end[tp]:
                        out.append((tp.partition, r.key, r.value, list(r.headers)))
        return out
    finally:
        await consumer.stop()


async def _produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes | None]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        for key, value in records:  # one at a time: the input order is part of the fixture
            await producer.send_and_wait(topic, value=value, key=key)
    finally:
        await producer.stop()


def _cli(tree: Path, python: str, env: Mapping[str, str], *args: str) -> None:
    result = subprocess.run(
        [python, "-m", "worker.cli", *args], env=dict(env), cwd=tree, capture_output=True,
        text=True, timeout=600,
    )  # fmt: skip
    if result.returncode != 0:
        raise RuntimeError(f"chunkstream {' '.join(args)}: {result.stderr.strip()}")


def _start_worker(
    tree: Path, python: str, env: Mapping[str, str], log: Path
) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [python, "-m", "worker.cli", "run"], env=dict(env), cwd=tree, stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip


def run_env(
    tree: Path, bootstrap: str, strategy: str, encoding: str, suffix: str
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHUNKSTREAM_")}
    env |= {
        "PYTHONPATH": str(tree),
        "CHUNKSTREAM_MODEL_PATH": str(MODELS),
        "CHUNKSTREAM_BOOTSTRAP_SERVERS": bootstrap,
        "CHUNKSTREAM_INPUT_TOPIC": f"contract-in-{suffix}",
        "CHUNKSTREAM_OUTPUT_TOPIC": f"contract-chunks-{suffix}",
        "CHUNKSTREAM_DLQ_TOPIC": f"contract-dlq-{suffix}",
        "CHUNKSTREAM_DOCUMENTS_TOPIC": f"contract-docs-{suffix}",
        "CHUNKSTREAM_GROUP_ID": f"contract-{suffix}",
        "CHUNKSTREAM_STRATEGY": strategy,
        "CHUNKSTREAM_ENCODING": encoding,
        "CHUNKSTREAM_METRICS_PORT": "0",
        "CHUNKSTREAM_LOG_LEVEL": "WARNING",
    }
    return env


async def capture(
    tree: Path, python: str, bootstrap: str, strategy: str, encoding: str, log: Path
) -> dict[str, Any]:
    """The digests of every topic one run writes, for the fixed input."""
    suffix = uuid.uuid4().hex[:SUFFIX_LEN]
    env = run_env(tree, bootstrap, strategy, encoding, suffix)
    _cli(tree, python, env, "topics", "--partitions", "3",
         "--input-topic", env["CHUNKSTREAM_INPUT_TOPIC"],
         "--output-topic", env["CHUNKSTREAM_OUTPUT_TOPIC"],
         "--dlq-topic", env["CHUNKSTREAM_DLQ_TOPIC"],
         "--documents-topic", env["CHUNKSTREAM_DOCUMENTS_TOPIC"],
         "--group-id", env["CHUNKSTREAM_GROUP_ID"])  # fmt: skip
    await _produce(bootstrap, env["CHUNKSTREAM_INPUT_TOPIC"], input_records(corpus()))
    worker = _start_worker(tree, python, env, log)
    try:
        await asyncio.to_thread(
            _cli, tree, python, env, "lag", "--group", env["CHUNKSTREAM_GROUP_ID"],
            "--topic", env["CHUNKSTREAM_INPUT_TOPIC"], "--wait", "420",
        )  # fmt: skip
    finally:
        worker.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(worker.wait, 120)
    if code != 0:
        raise RuntimeError(f"the worker exited {code}: {log}")
    topics = {
        "chunks": (env["CHUNKSTREAM_OUTPUT_TOPIC"], True),
        "dead_letters": (env["CHUNKSTREAM_DLQ_TOPIC"], True),
        "documents": (env["CHUNKSTREAM_DOCUMENTS_TOPIC"], True),
        "state": (f"{env['CHUNKSTREAM_GROUP_ID']}-document-state-changelog", False),
    }
    result: dict[str, Any] = {}
    for role, (topic, timed) in topics.items():
        records = await _read_topic(bootstrap, topic)
        result[role] = digest(records, encoding, suffix, timed=timed)
    return result


def run_name(strategy: str, encoding: str) -> str:
    return f"{strategy}/{encoding}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, default=REPO, help="the checkout to capture")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--commit", required=True, help="the commit the tree is at")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    log = args.out.with_suffix(".log")
    runs = {}
    for strategy, encoding in RUNS:
        runs[run_name(strategy, encoding)] = asyncio.run(
            capture(args.tree.resolve(), args.python, args.bootstrap, strategy, encoding, log)
        )
        print(run_name(strategy, encoding), runs[run_name(strategy, encoding)], flush=True)
    golden = {"made_by": args.commit, "documents": len(corpus()), "runs": runs}
    buffer = io.StringIO()
    json.dump(golden, buffer, indent=2, sort_keys=True)
    args.out.write_text(buffer.getvalue() + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
