"""The fault campaign: does a sink fed by the chunk topic stay equal to the documents through every
fault production brings? (issue 45)

    .venv/bin/python -m bench.fault_campaign [--plan full|ci] [--seeds N] [--first-seed S]

One run: a private broker, fresh topics of 6 input partitions, a group of 3 worker processes, and
a stream of document events with edits and deletes (tests/support/lifecycle_changelog.py) produced
over a while, as faults chosen by the seed land on it: members killed (SIGKILL) and stopped
(SIGTERM) and replaced, a member paused past its session timeout (SIGSTOP) and resumed (SIGCONT),
the broker killed (SIGKILL) and restarted, members added and removed. Each kind of fault happens
at least once per run. Then the group is left to finish, and the verdict comes from parts nobody
here wrote: the chunk topic read with librdkafka (``read_committed``), decoded with the
``msgpack`` library and applied as a stock sink applies it (upsert by key, delete on a null
value) must equal chunking each surviving document's last version directly: no stale chunk, no
missing chunk, no chunk with other text; under exactly-once no chunk event of one input record
twice; the input committed to its end; no dead letter.

The seed is printed first: ``--first-seed S --seeds 1`` runs that campaign again (the faults'
kinds, order and spacing, and the stream, are the seed's; where each fault lands in the work is
the machine's). tests/faults/test_campaign.py runs the ``ci`` plan under both guarantees;
docs/benchmarks.md keeps the last figures of the ``full`` plan.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import msgpack
from aiokafka.errors import KafkaError

from tests.support import kafka_io
from tests.support.librdkafka import decode, read_topic
from tests.support.lifecycle_changelog import PARAMS, Truth, changelog, expected_chunks
from tests.support.private_broker import PrivateBroker
from tests.support.processes import until_catching
from worker.config import Settings

FAULTS = ("sigkill", "sigterm", "sigstop", "broker-kill", "member-added", "member-removed")
SESSION_TIMEOUT_MS = 6000


@dataclass(frozen=True)
class Plan:
    name: str
    records: int  # document events and tombstones in the stream
    documents: int  # distinct document ids
    faults: int  # at least len(FAULTS): each kind once, the rest drawn by the seed
    stream_s: float  # the stream is produced evenly over this long
    members: int = 3
    partitions: int = 6
    # A stall: the group's commits have not moved for this long while input is left (not a
    # bound on the whole settle, which a slower machine may need longer for).
    settle_idle_s: float = 180.0


PLANS = {
    # In the suite: every kind of fault once, a few hundred documents.
    "ci": Plan("ci", records=900, documents=320, faults=6, stream_s=40.0),
    # The size: over 2,000 documents with edits and deletes mixed in.
    "full": Plan("full", records=3400, documents=2300, faults=10, stream_s=90.0),
}


@dataclass
class Outcome:
    seed: int
    guarantee: str
    plan: str
    documents: int = 0  # surviving documents at the end
    records: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    events: int = 0  # chunk events read
    tombstones: int = 0
    stale: int = 0
    missing: int = 0
    wrong_text: int = 0
    duplicates: int = 0  # chunk events of one input record beyond the first
    dead_letters: int = 0
    committed_to_end: bool = False
    exits_ok: bool = True
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        duplicates_ok = self.duplicates == 0 or self.guarantee == "at-least-once"
        return (
            self.stale == 0
            and self.missing == 0
            and self.wrong_text == 0
            and duplicates_ok
            and self.dead_letters == 0
            and self.committed_to_end
            and self.exits_ok
        )


def table(outcomes: Sequence[Outcome]) -> str:
    rows = [
        "| seed | guarantee | documents left | records | faults | chunk events | tombstones "
        "| stale | missing | duplicates | dead letters | committed to end | seconds | ok |",
        "|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---|---:|---|",
    ]
    for o in outcomes:
        faults = ", ".join(f"{kind} {n}" for kind, n in sorted(o.faults.items()))
        rows.append(
            f"| {o.seed} | {o.guarantee} | {o.documents} | {o.records} | {faults} | {o.events} "
            f"| {o.tombstones} | {o.stale} | {o.missing + o.wrong_text} | {o.duplicates} "
            f"| {o.dead_letters} | {'yes' if o.committed_to_end else 'NO'} | {o.seconds:.0f} "
            f"| {'✓' if o.ok else '✗'} |"
        )
    return "\n".join(rows)


class Group:
    """The worker processes of one campaign, with their logs."""

    def __init__(self, settings: Settings, logdir: Path) -> None:
        self.settings = settings
        self.logdir = logdir
        self.procs: list[subprocess.Popen[bytes]] = []
        self.expected_exit: dict[int, int] = {}  # pid → the exit status its fault calls for

    def spawn(self) -> subprocess.Popen[bytes]:
        log = self.logdir / f"worker-{len(self.procs)}.log"
        proc = kafka_io.worker_process(self.settings, log)
        self.procs.append(proc)
        return proc

    def alive(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in self.procs if p.poll() is None and p.pid not in self.expected_exit]

    async def stop(self, proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
        self.expected_exit[proc.pid] = -signal.SIGKILL if sig == signal.SIGKILL else 0
        if sig == signal.SIGTERM:  # a pod deleted as it starts: once it can catch it at all
            await until_catching(proc, signal.SIGTERM)
        proc.send_signal(sig)
        await asyncio.to_thread(proc.wait, 120)

    async def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                self.expected_exit.setdefault(proc.pid, 0)
                proc.send_signal(signal.SIGCONT)
                await until_catching(proc, signal.SIGTERM)
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                await asyncio.to_thread(proc.wait, 120)
            except subprocess.TimeoutExpired:
                proc.kill()
                await asyncio.to_thread(proc.wait, 30)

    def bad_exits(self) -> list[str]:
        return [
            f"worker pid {p.pid} exited {p.returncode}"
            for p in self.procs
            if p.returncode != self.expected_exit.get(p.pid, 0)
        ]


def schedule(plan: Plan, rng: random.Random) -> list[tuple[float, str]]:
    """(seconds into the stream, fault kind): every kind once, the rest drawn, spread over the
    stream with a random spacing."""
    kinds = list(FAULTS) + [rng.choice(FAULTS) for _ in range(max(0, plan.faults - len(FAULTS)))]
    rng.shuffle(kinds)
    slot = plan.stream_s / len(kinds)
    return [(i * slot + rng.uniform(0.1, 0.6) * slot, kind) for i, kind in enumerate(kinds)]


async def feed(
    bootstrap: str, topic: str, records: Sequence[tuple[bytes, bytes | None]], plan: Plan
) -> None:
    """Produce ``records`` in order, in small batches spread over the plan's stream time,
    riding out a broker that is away (a batch is sent again; a record that had made it is then
    consumed twice, which the rules make a replay)."""
    per_batch = 20
    pause_s = plan.stream_s / max(1, len(records) // per_batch)
    for start in range(0, len(records), per_batch):
        batch: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]] = [
            (k, v, []) for k, v in records[start : start + per_batch]
        ]
        for attempt in range(240):
            try:
                await kafka_io.produce_raw(bootstrap, topic, batch)
                break
            except (KafkaError, OSError, TimeoutError):
                if attempt == 239:
                    raise
                await asyncio.sleep(0.5)
        await asyncio.sleep(pause_s)


async def inject(
    kind: str, group: Group, broker: PrivateBroker, plan: Plan, rng: random.Random
) -> None:
    alive = group.alive()
    if kind == "sigkill" and alive:
        await group.stop(rng.choice(alive), signal.SIGKILL)
        group.spawn()
    elif kind == "sigterm" and alive:
        await group.stop(rng.choice(alive), signal.SIGTERM)
        group.spawn()
    elif kind == "sigstop" and alive:
        victim = rng.choice(alive)
        victim.send_signal(signal.SIGSTOP)
        try:  # past the session timeout: the group moves its partitions to the others
            await asyncio.sleep(SESSION_TIMEOUT_MS / 1000 + rng.uniform(1.0, 5.0))
        finally:
            victim.send_signal(signal.SIGCONT)
    elif kind == "broker-kill":
        pid = broker.pid()
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            for _ in range(600):  # until the JVM is gone (a zombie has no command line)
                if broker.pid() is None:
                    break
                await asyncio.sleep(0.1)
        await asyncio.sleep(rng.uniform(1.0, 4.0))
        await asyncio.to_thread(broker.start)
    elif kind == "member-added":
        group.spawn()
    elif kind == "member-removed" and len(alive) > 1:
        await group.stop(rng.choice(alive), signal.SIGTERM)


async def run_one(
    broker: PrivateBroker, workdir: Path, plan: Plan, seed: int, guarantee: str
) -> Outcome:
    """One campaign on ``broker`` (started); its outcome."""
    started = time.monotonic()
    rng = random.Random(seed)
    outcome = Outcome(seed, guarantee, plan.name)
    suffix = uuid.uuid4().hex[:6]
    names = {
        "input_topic": f"campaign-in-{suffix}",
        "output_topic": f"campaign-out-{suffix}",
        "dlq_topic": f"campaign-dlq-{suffix}",
        "group_id": f"campaign-{suffix}",
    }
    settings = kafka_io.make_settings(
        broker.bootstrap,
        names,
        strategy="sentence",
        strategy_params=PARAMS,
        processing_guarantee=guarantee,
        session_timeout_ms=str(SESSION_TIMEOUT_MS),
        heartbeat_interval_ms="1000",
        rebalance_timeout_ms="15000",
        drain_timeout_s="10",
        max_in_flight_documents="64",
    )
    records, _ = changelog(plan.records, documents=plan.documents, seed=seed)
    outcome.records = len(records)
    logdir = workdir / f"{guarantee}-{seed}-{suffix}"
    logdir.mkdir(parents=True, exist_ok=True)
    await kafka_io.create(settings, partitions=plan.partitions)
    group = Group(settings, logdir)
    for _ in range(plan.members):
        group.spawn()
    feeder = asyncio.create_task(feed(broker.bootstrap, settings.input_topic, records, plan))
    try:
        begun = time.monotonic()
        for at, kind in schedule(plan, rng):
            await asyncio.sleep(max(0.0, begun + at - time.monotonic()))
            await inject(kind, group, broker, plan, rng)
            outcome.faults[kind] += 1
        await feeder
        while len(group.alive()) < plan.members:
            group.spawn()
        try:
            await kafka_io.wait_committed_to_end(
                broker.bootstrap,
                settings.group_id,
                settings.input_topic,
                timeout_s=plan.settle_idle_s,
                idle=True,
            )
            outcome.committed_to_end = True
        except TimeoutError as exc:
            outcome.notes.append(f"not committed to the end: {exc}")
            # What the workers wait on, in their logs (worker.observability.task_dump): twice,
            # a few seconds apart, to show what does not move.
            for _ in range(2):
                for proc in group.alive():
                    proc.send_signal(signal.SIGUSR1)
                await asyncio.sleep(3)
    finally:
        feeder.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await feeder
        await group.stop_all()
    bad = group.bad_exits()
    outcome.exits_ok = not bad
    outcome.notes.extend(bad)
    await judge(outcome, settings)
    outcome.seconds = time.monotonic() - started
    if not outcome.ok:
        outcome.notes.append(f"logs in {logdir}")
    return outcome


def input_truth(messages: Sequence[Any]) -> Truth:
    """What the input topic as it is says each document is now (the rules of
    docs/concepts/lifecycle.md applied in offset order; a document's records share a partition).
    Read back rather than taken from the generator: a batch the feeder sent again while the
    broker was away is in the input twice."""
    truth = Truth()
    for message in sorted(messages, key=lambda m: (m.partition(), m.offset())):
        doc_id = message.key().decode()
        if message.value() is None:
            truth.delete(doc_id)
            continue
        event = msgpack.unpackb(message.value(), raw=False)
        truth.put(doc_id, event.get("version"), event["text"])
    return truth


async def judge(outcome: Outcome, settings: Settings) -> None:
    """The verdict of parts nobody here wrote: librdkafka's read_committed reader, the msgpack
    library's decoder, and a stock sink's two rules."""
    read = partial(read_topic, settings.bootstrap_servers, isolation_level="read_committed")
    truth = input_truth(await asyncio.to_thread(read, settings.input_topic))
    messages = await asyncio.to_thread(read, settings.output_topic)
    sink: dict[str, str] = {}
    per_record: Counter[tuple[int, int, str]] = Counter()
    for message in messages:
        key = message.key().decode()
        if message.value() is None:
            outcome.tombstones += 1
            sink.pop(key, None)
            continue
        event, _, _ = decode(message)
        outcome.events += 1
        sink[key] = event["text"]
        source = event["source"]
        per_record[(source["partition"], source["offset"], key)] += 1
    expected = expected_chunks(truth, settings)
    outcome.documents = len(truth.texts)
    outcome.stale = len(set(sink) - set(expected))
    outcome.missing = len(set(expected) - set(sink))
    outcome.wrong_text = sum(1 for k, text in expected.items() if k in sink and sink[k] != text)
    outcome.duplicates = sum(n - 1 for n in per_record.values() if n > 1)
    letters = await kafka_io.dead_letters(settings.bootstrap_servers, settings.dlq_topic)
    outcome.dead_letters = len(letters)
