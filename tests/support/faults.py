"""Fault suite: real broker, real worker processes, real faults; prints what it saw.

    .venv/bin/python -m tests.support.faults [--profile full|short] [--only NAME ...]

Starts a private single-node Kafka broker (deploy/kafka/local-kafka, its own run dir and
ports, persistent data dir), then runs every scenario on fresh topics: a stream of documents
(the package-description corpus of tests/support/corpus.py plus generated documents, mixed sizes) is
produced while the fault is injected, the system is left to settle, and the output is
checked against the chunk ids computed offline for every document:

* lost: documents whose full chunk set (by chunk id) is not in the output topic and that
  did not rightly become a dead letter;
* duplicates: chunk events beyond the first per chunk id (replays; a replay whose content
  differs from the first copy is counted as "bad");
* dead letters: all of them; "unexpected" are dead letters of inputs that were not poison;
* committed: the group's committed offsets reached the end of the input topic;
* recovery: after each fault ends (restart, SIGCONT, topic back), seconds until the output
  topic grows again (the worst over the scenario's faults).

The same scenarios, shorter, run in CI (tests/faults/test_faults.py). The latest full table
is kept in docs/benchmarks.md; the scenarios are described in docs/operating/outages.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from tests.support import kafka_io
from tests.support.corpus import gather
from tests.support.generated_docs import make_docs
from tests.support.private_broker import PrivateBroker
from worker.chunking import registry
from worker.config import Settings
from worker.kafka.clients import create_topics, worker_topics
from worker.pipeline import chunk_document_sync
from worker.wire.events import ChunkEvent, DeadLetterEvent, DocumentEvent
from worker.wire.records import chunk_ids

STRATEGY_PARAMS = {"chunk_size": "300"}
Record = tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]


@dataclass(frozen=True)
class Profile:
    name: str
    documents: int  # generated documents per scenario (the corpus documents come on top)
    corpus: int  # corpus documents per scenario
    kills: int
    broker_restarts: int
    freeze_s: float
    churn_s: float
    poison_copies: int
    settle_timeout_s: float
    stream_s: float  # the documents are produced evenly over this long


PROFILES = {
    "full": Profile("full", 3000, 175, 6, 2, 15.0, 30.0, 5, 240.0, 45.0),
    "short": Profile("short", 400, 40, 2, 1, 8.0, 10.0, 1, 120.0, 12.0),
}


@dataclass
class Row:
    scenario: str
    documents: int
    poison: int
    faults: int
    lost: int = 0
    violations: int = 0  # a check made during the run failed (see notes)
    duplicates: int = 0
    bad_replays: int = 0
    dead_letters: int = 0
    unexpected_dead_letters: int = 0
    committed_to_end: bool = False
    recovery_s: float | None = None
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            self.lost == 0
            and self.violations == 0
            and self.bad_replays == 0
            and self.unexpected_dead_letters == 0
            and self.committed_to_end
        )


def table(rows: Sequence[Row]) -> str:
    out = [
        "| scenario | documents | faults injected | lost | duplicates | dead letters "
        "| recovery time | committed to end | ok |",
        "|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in rows:
        dl = f"{r.dead_letters}" + (
            f" ({r.unexpected_dead_letters} unexpected)" if r.unexpected_dead_letters else ""
        )
        dup = f"{r.duplicates}" + (f" ({r.bad_replays} differ)" if r.bad_replays else "")
        faults = f"{r.faults}" + (f" + {r.poison} poison" if r.poison and r.faults else "")
        if r.poison and not r.faults:
            faults = f"{r.poison} poison"
        recovery = "—" if r.recovery_s is None else f"{r.recovery_s:.1f} s"
        out.append(
            f"| {r.scenario} | {r.documents} | {faults} | {r.lost} | {dup} | {dl} | {recovery} "
            f"| {'yes' if r.committed_to_end else 'NO'} | {'✓' if r.ok else '✗'} |"
        )
    return "\n".join(out)


# -- documents ------------------------------------------------------------------------------


def documents(profile: Profile, seed: int, prefix: str) -> list[DocumentEvent]:
    """Generated documents (1-40 sentences) plus real package descriptions (up to ~140 KB,
    markdown, several scripts), interleaved deterministically."""
    docs = make_docs(profile.documents, seed=seed, prefix=prefix)
    corpus = gather()
    rng = random.Random(seed)
    picked = rng.sample(corpus, min(profile.corpus, len(corpus)))
    for i, d in enumerate(picked):
        position = rng.randint(0, len(docs))
        docs.insert(
            position,
            DocumentEvent(
                id=f"{prefix}-pkg-{i}-{d.name}",
                text=d.text,
                content_type=d.content_type,
                source=d.name,
                metadata={"package": d.name},
            ),
        )
    return docs


def expected_chunk_ids(docs: Sequence[DocumentEvent], settings: Settings) -> dict[str, set[str]]:
    """doc id → the chunk ids the worker must publish for it (computed offline, with the
    strategy built as a worker with ``settings`` builds it: the same model references)."""
    from worker.inference.serving import resolve

    refs = resolve(settings, boundary=False, retrieval=False)
    context = registry.BuildContext(boundary=refs.boundary, retrieval=refs.retrieval)
    built = registry.build(settings.strategy, settings.strategy_params, context)
    expected: dict[str, set[str]] = {}
    for doc in docs:
        chunks = chunk_document_sync(built, doc.text, doc.content_type, None)
        expected[doc.id] = set(chunk_ids(doc.id, built.fingerprint, [c.text for c in chunks]))
    return expected


# A poison record's own document id, in the JSON forms above (with or without a space).
_OWN_ID = re.compile(rb'"id": ?"(?:t|u|big|s|q|m|a)"')


def poison_records(copies: int, max_document_bytes: int, seed: int) -> list[Record]:
    """Every kind of bad input, ``copies`` times each, keys ``poison-<kind>-<n>``."""
    rng = random.Random(seed)
    json_h = [("content-type", b"application/json")]
    mp_h = [("content-type", b"application/msgpack")]
    good = msgspec.msgpack.encode(DocumentEvent(id="t", text="Truncated. " * 20))
    records: list[Record] = []
    for n in range(copies):
        kinds: dict[str, tuple[bytes | None, list[tuple[str, bytes]]]] = {
            "random-bytes": (bytes(rng.randrange(256) for _ in range(rng.randint(1, 400))), []),
            "truncated-msgpack": (good[: rng.randint(3, len(good) - 1)], mp_h),
            "wrong-json-types": (b'{"id": 5, "text": ["not", "a", "string"]}', json_h),
            "missing-id": (b'{"text": "no id here"}', json_h),
            "blank-id": (b'{"id": "   ", "text": "blank"}', json_h),
            "invalid-utf8": (b'{"id": "u", "text": "bad \xff\xfe bytes"}', json_h),
            "invalid-utf8-msgpack": (b"\x82\xa2id\xa1a\xa4text\xa2\xff\xfe", mp_h),
            "oversized": (
                msgspec.json.encode({"id": "big", "text": "x" * (max_document_bytes + 10)}),
                json_h,
            ),
            "unknown-strategy": (
                msgspec.json.encode({"id": "s", "text": "hi", "strategy": {"name": "nope"}}),
                json_h,
            ),
            "negative-chunk-size": (
                msgspec.json.encode(
                    {
                        "id": "q",
                        "text": "hi",
                        "strategy": {"name": "sentence", "params": {"chunk_size": -4}},
                    }
                ),
                json_h,
            ),
            "huge-chunk-size": (
                msgspec.json.encode(
                    {
                        "id": "q",
                        "text": "hi",
                        "strategy": {"name": "sentence", "params": {"chunk_size": 10**30}},
                    }
                ),
                json_h,
            ),
            "unknown-param": (
                msgspec.json.encode(
                    {
                        "id": "q",
                        "text": "hi",
                        "strategy": {"name": "sentence", "params": {"eval": "__import__('os')"}},
                    }
                ),
                json_h,
            ),
            "too-many-metadata": (
                msgspec.json.encode(
                    {"id": "m", "text": "t", "metadata": {f"k{i}": i for i in range(100)}}
                ),
                json_h,
            ),
            "bad-content-type": (b'{"id": "a", "text": "t"}', [("content-type", b"text/csv")]),
            # Keyed by another id than its own: a changelog's key is the document.
            "key-mismatch": (b'{"id": "other", "text": "t"}', json_h),
        }
        for kind, (value, headers) in kinds.items():
            key = f"poison-{kind}-{n}"
            if kind != "key-mismatch" and value is not None:
                # The document's own id is its key (docs/concepts/lifecycle.md), so each record is
                # refused for the fault it carries, not for a key that differs from its id.
                value = _OWN_ID.sub(b'"id": "' + key.encode() + b'"', value)
            records.append((key.encode(), value, headers))
    return records


# -- the harness ----------------------------------------------------------------------------


class Harness:
    """One scenario's topics, feeder, worker processes, output monitor and verdict."""

    def __init__(
        self,
        broker: PrivateBroker,
        workdir: Path,
        profile: Profile,
        name: str,
        params: dict[str, str] | None = None,
    ) -> None:
        self.broker = broker
        self.params = params or STRATEGY_PARAMS
        self.violations: list[str] = []
        self.profile = profile
        self.name = name
        suffix = uuid.uuid4().hex[:6]
        self.names = {
            "input_topic": f"{name}-in-{suffix}",
            "output_topic": f"{name}-out-{suffix}",
            "dlq_topic": f"{name}-dlq-{suffix}",
            "group_id": f"{name}-group-{suffix}",
        }
        self.logdir = workdir / f"{name}-{suffix}"
        self.logdir.mkdir(parents=True, exist_ok=True)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.progress: list[tuple[float, int]] = []
        self.fault_ends: list[float] = []
        self._spawned = 0

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    def settings(self, **overrides: Any) -> Settings:
        return kafka_io.make_settings(
            self.bootstrap,
            self.names,
            strategy_params=self.params,
            session_timeout_ms=6000,
            heartbeat_interval_ms=1000,
            rebalance_timeout_ms=15000,
            drain_timeout_s=10,
            **overrides,
        )

    async def create_topics(self, settings: Settings, partitions: int = 4, **kw: Any) -> None:
        big = 16 * 1024 * 1024
        topics, configs = worker_topics(settings, partitions)
        output = {settings.output_topic: topics.pop(settings.output_topic)}
        await create_topics(settings, topics, max_message_bytes=big, configs=configs)
        await create_topics(settings, output, max_message_bytes=kw.get("output_max_bytes", big))

    def spawn(self, settings: Settings) -> subprocess.Popen[bytes]:
        self._spawned += 1
        proc = kafka_io.worker_process(settings, self.logdir / f"worker-{self._spawned}.log")
        self.procs.append(proc)
        return proc

    async def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                await asyncio.to_thread(proc.wait, 40)
            except subprocess.TimeoutExpired:
                proc.kill()
                await asyncio.to_thread(proc.wait, 10)

    async def feed(
        self,
        records: Sequence[Record],
        *,
        per_batch: int = 25,
        gate: asyncio.Event | None = None,
    ) -> None:
        """Produce ``records`` in order, in batches spread over the profile's stream time;
        waits at ``gate`` while it is clear."""
        pause_s = self.profile.stream_s / max(1, len(records) // per_batch)
        for start in range(0, len(records), per_batch):
            if gate is not None:
                await gate.wait()
            batch = records[start : start + per_batch]
            for attempt in range(60):
                try:
                    await kafka_io.produce_raw(self.bootstrap, self.names["input_topic"], batch)
                    break
                except KafkaError:
                    # The broker went away under the batch: send it again (a record that had
                    # made it is then consumed twice, which only adds identical replays).
                    if attempt == 59:
                        raise
                    await asyncio.sleep(1)
            await asyncio.sleep(pause_s)

    async def monitor(self) -> None:
        """Sample the output topic's end offsets (sum) every 0.25 s, across broker faults."""
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, request_timeout_ms=5000)
        await consumer.start()
        try:
            parts = [
                TopicPartition(self.names["output_topic"], p)
                for p in sorted(consumer.partitions_for_topic(self.names["output_topic"]) or ())
            ] or [TopicPartition(self.names["output_topic"], p) for p in range(4)]
            while True:
                try:
                    ends = await asyncio.wait_for(consumer.end_offsets(parts), 3)
                    self.progress.append((time.monotonic(), sum(ends.values())))
                except (KafkaError, TimeoutError):
                    pass
                await asyncio.sleep(0.25)
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(consumer.stop(), 10)

    def fault_ended(self) -> None:
        self.fault_ends.append(time.monotonic())

    def recovery(self) -> float | None:
        """Worst time from a fault's end to the next growth of the output topic."""
        worst: float | None = None
        for end in self.fault_ends:
            before = [n for t, n in self.progress if t <= end]
            base = before[-1] if before else 0
            after = [t for t, n in self.progress if t > end and n > base]
            final = self.progress[-1][1] if self.progress else 0
            if after:
                took = after[0] - end
            elif base >= final:
                took = 0.0  # nothing was left to publish
            else:
                continue
            worst = took if worst is None else max(worst, took)
        return worst

    async def settle(self) -> bool:
        """Wait until the group's committed offsets reach the input's end (tolerating a
        broker that is still coming back)."""
        deadline = time.monotonic() + self.profile.settle_timeout_s
        while time.monotonic() < deadline:
            try:
                await kafka_io.wait_committed_to_end(
                    self.bootstrap,
                    self.names["group_id"],
                    self.names["input_topic"],
                    timeout_s=max(1.0, deadline - time.monotonic()),
                )
                return True
            except (KafkaError, TimeoutError, OSError):
                await asyncio.sleep(1)
        return False

    async def verdict(
        self,
        docs: Sequence[DocumentEvent],
        *,
        poison: int,
        faults: int,
        started: float,
        expected_dead: set[bytes],
        committed: bool,
    ) -> Row:
        expected = expected_chunk_ids(docs, self.settings())
        events = await kafka_io.chunk_events(self.bootstrap, self.names["output_topic"])
        letters: list[DeadLetterEvent] = await kafka_io.dead_letters(
            self.bootstrap, self.names["dlq_topic"]
        )
        first: dict[str, ChunkEvent] = {}
        seen: dict[str, set[str]] = defaultdict(set)
        row = Row(self.name, len(docs), poison, faults)
        for ev in events:
            prior = first.get(ev.chunk_id)
            if prior is None:
                first[ev.chunk_id] = ev
                seen[ev.doc_id].add(ev.chunk_id)
                continue
            row.duplicates += 1
            if (prior.text, prior.start_index, prior.end_index, prior.index) != (
                ev.text,
                ev.start_index,
                ev.end_index,
                ev.index,
            ):
                row.bad_replays += 1
        dead_keys = Counter(dl.key for dl in letters)
        row.dead_letters = len(letters)
        row.unexpected_dead_letters = sum(
            n for key, n in dead_keys.items() if key not in expected_dead
        )
        missing_dead = expected_dead - set(dead_keys)
        if missing_dead:
            row.notes.append(f"{len(missing_dead)} poison inputs without a dead letter")
            row.lost += len(missing_dead)
        for doc in docs:
            if doc.id.encode() in expected_dead:
                continue
            if seen.get(doc.id, set()) != expected[doc.id]:
                row.lost += 1
        stray = sum(1 for cid, ev in first.items() if cid not in expected.get(ev.doc_id, ()))
        if stray:
            row.notes.append(f"{stray} chunk events with unexpected ids")
            row.bad_replays += stray
        row.violations = len(self.violations)
        row.notes.extend(self.violations)
        row.committed_to_end = committed
        row.recovery_s = self.recovery()
        row.seconds = time.monotonic() - started
        return row


# -- scenarios ------------------------------------------------------------------------------

ScenarioFn = Callable[[PrivateBroker, Path, Profile, random.Random], Awaitable[Row]]


async def _run(
    h: Harness,
    docs: Sequence[DocumentEvent],
    inject: Callable[[Settings], Awaitable[int]],
    *,
    extra_records: Sequence[Record] = (),
    expected_dead: set[bytes] | None = None,
    settings: Settings | None = None,
    workers: int = 1,
    topic_options: dict[str, Any] | None = None,
    gate: asyncio.Event | None = None,
) -> Row:
    started = time.monotonic()
    settings = settings or h.settings()
    await h.create_topics(settings, **(topic_options or {}))
    records = kafka_io.encode_documents(docs)
    if extra_records:
        rng = random.Random(len(records))
        for record in extra_records:
            records.insert(rng.randint(0, len(records)), record)
    monitor = asyncio.create_task(h.monitor())
    for _ in range(workers):
        h.spawn(settings)
    feeder = asyncio.create_task(h.feed(records, gate=gate))
    try:
        faults = await inject(settings)
        await feeder
        committed = await h.settle()
    finally:
        feeder.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await feeder
        await h.stop_all()
        monitor.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await monitor
    return await h.verdict(
        docs,
        poison=len(extra_records),
        faults=faults,
        started=started,
        expected_dead=expected_dead or set(),
        committed=committed,
    )


async def _wait_output(h: Harness, at_least: int, timeout_s: float = 60) -> None:
    """Until the output topic holds ``at_least`` more events than at the call."""
    base = h.progress[-1][1] if h.progress else 0
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if h.progress and h.progress[-1][1] >= base + at_least:
            return
        await asyncio.sleep(0.1)


async def scenario_kill(broker: PrivateBroker, work: Path, p: Profile, rng: random.Random) -> Row:
    """The worker is SIGKILLed at random moments and restarted at once, while documents flow."""
    h = Harness(broker, work, p, "worker-sigkill")
    docs = documents(p, seed=rng.randrange(1 << 30), prefix="k")

    async def inject(settings: Settings) -> int:
        for _ in range(p.kills):
            await _wait_output(h, rng.randint(50, 400))
            await asyncio.sleep(rng.uniform(0.0, 1.5))
            victim = h.procs[-1]
            victim.kill()
            await asyncio.to_thread(victim.wait, 30)
            h.spawn(settings)
            h.fault_ended()
        return p.kills

    return await _run(h, docs, inject)


async def scenario_broker_restart(
    broker: PrivateBroker, work: Path, p: Profile, rng: random.Random
) -> Row:
    """The broker is stopped and started again (same data dir) while the worker keeps
    running; the worker must reconnect and finish by itself."""
    h = Harness(broker, work, p, "broker-restart")
    docs = documents(p, seed=rng.randrange(1 << 30), prefix="r")
    gate = asyncio.Event()
    gate.set()

    async def inject(settings: Settings) -> int:
        for _ in range(p.broker_restarts):
            await _wait_output(h, rng.randint(200, 600))
            gate.clear()  # the test's own producer waits while the broker is down
            await asyncio.to_thread(broker.stop)
            await asyncio.sleep(rng.uniform(2.0, 5.0))
            await asyncio.to_thread(broker.start)
            h.fault_ended()
            gate.set()
        return p.broker_restarts

    return await _run(h, docs, inject, gate=gate)


async def scenario_broker_freeze(
    broker: PrivateBroker, work: Path, p: Profile, rng: random.Random
) -> Row:
    """The broker is frozen with SIGSTOP (connections open, nothing answers), then resumed
    with SIGCONT; longer than the session timeout, so the group must re-form."""
    h = Harness(broker, work, p, "broker-freeze")
    docs = documents(p, seed=rng.randrange(1 << 30), prefix="f")
    gate = asyncio.Event()
    gate.set()

    async def inject(settings: Settings) -> int:
        await _wait_output(h, rng.randint(200, 600))
        gate.clear()
        broker.freeze()
        try:
            await asyncio.sleep(p.freeze_s)
        finally:
            broker.thaw()
        h.fault_ended()
        gate.set()
        return 1

    return await _run(h, docs, inject, gate=gate)


async def scenario_churn(broker: PrivateBroker, work: Path, p: Profile, rng: random.Random) -> Row:
    """Three workers in one group; every few seconds one member leaves (SIGTERM, or SIGKILL
    one time in three) and a new one joins."""
    h = Harness(broker, work, p, "group-churn")
    docs = documents(p, seed=rng.randrange(1 << 30), prefix="c")

    async def inject(settings: Settings) -> int:
        faults = 0
        deadline = time.monotonic() + p.churn_s
        await _wait_output(h, 100)
        while time.monotonic() < deadline:
            await asyncio.sleep(rng.uniform(1.5, 3.5))
            alive = [proc for proc in h.procs if proc.poll() is None]
            victim = rng.choice(alive)
            if rng.random() < 1 / 3:
                victim.kill()
            else:
                victim.send_signal(signal.SIGTERM)
            h.spawn(settings)
            h.fault_ended()
            faults += 1
        return faults

    return await _run(h, docs, inject, workers=3)


async def scenario_poison(broker: PrivateBroker, work: Path, p: Profile, rng: random.Random) -> Row:
    """Every kind of bad input interleaved with good documents: each becomes one dead letter,
    the good documents around it are unaffected, and the partition never stalls."""
    h = Harness(broker, work, p, "poison-pills")
    docs = documents(p, seed=rng.randrange(1 << 30), prefix="p")
    settings = h.settings(max_document_bytes=200_000, allowed_strategies="sentence")
    poison = poison_records(p.poison_copies, settings.max_document_bytes, rng.randrange(1 << 30))

    async def inject(settings: Settings) -> int:
        return 0

    return await _run(
        h,
        docs,
        inject,
        extra_records=poison,
        expected_dead={key for key, _, _ in poison if key is not None},
        settings=settings,
    )


async def scenario_output_too_large(
    broker: PrivateBroker, work: Path, p: Profile, rng: random.Random
) -> Row:
    """The output topic accepts only 64 KiB records. A worker configured for larger records
    (CHUNKSTREAM_MAX_RECORD_BYTES above the topic's max.message.bytes) refuses to start, with
    exit 2 and a message naming the setting. The worker configured to match it publishes every
    document whose chunk events fit, and turns each document with a larger chunk event into an
    `output_record_too_large` dead letter (its offset is then committed: no retry can
    succeed)."""
    h = Harness(
        broker,
        work,
        p,
        "output-too-large",
        params={"chunk_size": "200000", "tokenizer": "character"},
    )
    # Generated documents only (≤ ~8 KB each: every chunk event fits), plus documents of one
    # ~100 KB "sentence": with chunk_size 200000, one ~100 KB chunk event the topic refuses.
    docs = make_docs(p.documents, seed=rng.randrange(1 << 30), prefix="o")
    big = [
        DocumentEvent(id=f"o-big-{i}", text="word " * 20_000 + "end.")
        for i in range(max(3, p.documents // 100))
    ]
    for doc in big:
        docs.insert(rng.randint(0, len(docs)), doc)

    async def inject(settings: Settings) -> int:
        # A worker told it may send 1 MiB records refuses to start against this topic: the
        # broker would refuse whole batches of small events, dead-lettering good documents.
        wrong = msgspec.structs.replace(settings, max_record_bytes=1024 * 1024)
        proc = h.spawn(wrong)
        try:
            code = await asyncio.to_thread(proc.wait, 90)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = None
        log = (h.logdir / f"worker-{h._spawned}.log").read_text(errors="replace")
        if code != 2 or "CHUNKSTREAM_MAX_RECORD_BYTES" not in log:
            h.violations.append(f"misconfigured worker: exit {code}, no clear message")
        return 0

    row = await _run(
        h,
        docs,
        inject,
        expected_dead={d.id.encode() for d in big},
        settings=h.settings(max_record_bytes=64 * 1024),
        topic_options={"output_max_bytes": 64 * 1024},
    )
    row.faults = len(big)
    return row


async def scenario_output_deleted(
    broker: PrivateBroker, work: Path, p: Profile, rng: random.Random
) -> Row:
    """The output topic disappears while documents arrive, and comes back later: the worker
    retries with backoff and commits nothing it could not publish; once the topic exists
    again everything is published and committed."""
    h = Harness(broker, work, p, "output-deleted")
    docs = documents(p, seed=rng.randrange(1 << 30), prefix="d")
    gate = asyncio.Event()  # documents flow only once the output topic is gone

    async def inject(settings: Settings) -> int:
        await asyncio.sleep(3)  # the worker is up and has seen its topics
        admin = AIOKafkaAdminClient(bootstrap_servers=h.bootstrap)
        await admin.start()
        try:
            await admin.delete_topics([settings.output_topic])
            await asyncio.sleep(2)
            gate.set()
            await asyncio.sleep(p.freeze_s)
            committed = await kafka_io.committed_offsets(h.bootstrap, settings.group_id)
            if any(committed.values()):
                h.violations.append(f"input committed while the output was missing: {committed}")
            await create_topics(
                settings, {settings.output_topic: 4}, max_message_bytes=16 * 1024 * 1024
            )
            h.fault_ended()
        finally:
            await admin.close()
        return 1

    return await _run(h, docs, inject, gate=gate)


SCENARIOS: dict[str, ScenarioFn] = {
    "worker-sigkill": scenario_kill,
    "broker-restart": scenario_broker_restart,
    "broker-freeze": scenario_broker_freeze,
    "group-churn": scenario_churn,
    "poison-pills": scenario_poison,
    "output-too-large": scenario_output_too_large,
    "output-deleted": scenario_output_deleted,
}


async def run_suite(
    broker: PrivateBroker, workdir: Path, profile: Profile, only: Sequence[str] = (), seed: int = 1
) -> list[Row]:
    rows = []
    for name, fn in SCENARIOS.items():
        if only and name not in only:
            continue
        rng = random.Random(f"{seed}-{name}")
        print(f"faults: {name} ...", file=sys.stderr, flush=True)
        row = await fn(broker, workdir, profile, rng)
        print(f"faults: {name}: {'ok' if row.ok else 'FAILED'} {row}", file=sys.stderr, flush=True)
        rows.append(row)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", choices=sorted(PROFILES), default="full")
    parser.add_argument("--only", nargs="*", default=[], choices=sorted(SCENARIOS))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep the run dir (logs)")
    args = parser.parse_args(argv)
    profile = PROFILES[args.profile]
    base = Path(tempfile.mkdtemp(prefix="chunkstream-faults-"))
    broker = PrivateBroker(base / "broker")
    broker.start()
    started = time.monotonic()
    try:
        rows = asyncio.run(run_suite(broker, base / "runs", profile, args.only, args.seed))
    finally:
        broker.stop()
    print(
        f"\nfault suite, profile {profile.name}, {time.monotonic() - started:.0f} s, "
        f"{os.cpu_count()} cores; logs in {base}\n"
    )
    print(table(rows))
    for row in rows:
        for note in row.notes:
            print(f"- {row.scenario}: {note}")
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
