"""The worker against a real Kafka broker: delivery, dead letters, restarts, group sharing."""

from __future__ import annotations

import asyncio
import signal
import time
from collections import defaultdict
from pathlib import Path

import msgspec
import pytest

from tests.support import kafka_io
from tests.support.generated_docs import check_complete, make_docs
from tests.support.kafka_io import run_worker_until
from worker.app import Worker
from worker.wire.events import DocumentEvent, StrategyOverride

pytestmark = pytest.mark.kafka


async def test_happy_path_every_chunk_published_and_offsets_committed(
    kafka_bootstrap: str, topic_names: dict[str, str]
) -> None:
    settings = kafka_io.make_settings(
        kafka_bootstrap, topic_names, strategy_params="chunk_size=300,tokenizer=character"
    )
    await kafka_io.create(settings)
    docs = make_docs(60)
    await kafka_io.produce_raw(
        kafka_bootstrap, settings.input_topic, kafka_io.encode_documents(docs)
    )

    worker = Worker(settings)
    done = asyncio.ensure_future(
        kafka_io.wait_committed_to_end(kafka_bootstrap, settings.group_id, settings.input_topic)
    )
    assert await run_worker_until(worker, done) == 0

    events = await kafka_io.chunk_events(kafka_bootstrap, settings.output_topic)
    assert check_complete(docs, events) == {}
    assert all(len(ev.text) <= 300 for ev in events)
    assert await kafka_io.dead_letters(kafka_bootstrap, settings.dlq_topic) == []
    # Chunks of one document stay in one partition, in index order.
    records = await kafka_io.read_all(kafka_bootstrap, settings.output_topic)
    partitions: dict[bytes, set[int]] = defaultdict(set)
    for r in records:
        partitions[r.key].add(r.partition)
    assert all(len(p) == 1 for p in partitions.values())


async def test_json_encoding_and_documents_without_headers(
    kafka_bootstrap: str, topic_names: dict[str, str]
) -> None:
    settings = kafka_io.make_settings(kafka_bootstrap, topic_names, encoding="json")
    await kafka_io.create(settings, partitions=1)
    docs = make_docs(5, seed=3)
    raw = [
        (None, msgspec.json.encode(docs[0]), []),  # JSON, no header: sniffed
        (None, msgspec.msgpack.encode(docs[1]), []),  # msgpack, no header: sniffed
        *kafka_io.encode_documents(docs[2:], encoding="json"),
    ]
    await kafka_io.produce_raw(kafka_bootstrap, settings.input_topic, raw)
    done = asyncio.ensure_future(
        kafka_io.wait_committed_to_end(kafka_bootstrap, settings.group_id, settings.input_topic)
    )
    assert await run_worker_until(Worker(settings), done) == 0
    records = await kafka_io.read_all(kafka_bootstrap, settings.output_topic)
    assert {dict(r.headers)["content-type"] for r in records} == {b"application/json"}
    assert all(r.value.startswith(b"{") for r in records)
    check_complete(docs, await kafka_io.chunk_events(kafka_bootstrap, settings.output_topic))


async def test_malformed_records_go_to_the_dead_letter_topic_with_their_reason(
    kafka_bootstrap: str, topic_names: dict[str, str]
) -> None:
    settings = kafka_io.make_settings(
        kafka_bootstrap, topic_names, max_document_bytes=20_000, allowed_strategies="sentence"
    )
    await kafka_io.create(settings, partitions=1)
    good = make_docs(4, seed=11)
    msgpack_header = [("content-type", b"application/msgpack")]
    json_header = [("content-type", b"application/json")]
    poison: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]] = [
        (b"p-bytes", bytes(range(7, 200)), []),
        (b"p-truncated", msgspec.msgpack.encode(good[0])[:20], msgpack_header),
        (b"p-types", b'{"id": 5, "text": ["not", "a", "string"]}', json_header),
        (b"p-missing", b'{"text": "no id here"}', json_header),
        (b"p-utf8", b'{"id": "u", "text": "bad \xff\xfe bytes"}', json_header),
        (b"p-big", msgspec.json.encode({"id": "big", "text": "x" * 30_000}), json_header),
        (
            b"p-strategy",
            msgspec.json.encode({"id": "p-strategy", "text": "hi", "strategy": {"name": "nope"}}),
            json_header,
        ),
        (
            b"p-params",
            msgspec.json.encode(
                {
                    "id": "p-params",
                    "text": "hi",
                    "strategy": {"name": "sentence", "params": {"chunk_size": -4}},
                }
            ),
            json_header,
        ),
        (
            b"p-refused",
            msgspec.json.encode({"id": "p-refused", "text": "hi", "strategy": {"name": "lexical"}}),
            json_header,
        ),
        # The key of a changelog is the document: a record keyed otherwise is refused.
        (b"p-mismatch", msgspec.json.encode({"id": "other", "text": "hi"}), json_header),
        # A tombstone of a document never seen is a no-op, not a dead letter.
        (b"p-unknown", None, []),
    ]
    expected_kinds = {
        b"p-bytes": "undecodable",
        b"p-truncated": "undecodable",
        b"p-types": "schema_violation",
        b"p-missing": "schema_violation",
        b"p-utf8": "invalid_utf8",
        b"p-big": "document_too_large",
        b"p-strategy": "unknown_strategy",
        b"p-params": "invalid_strategy_params",
        b"p-refused": "strategy_not_allowed",
        b"p-mismatch": "key_mismatch",
    }
    good_records = kafka_io.encode_documents(good)
    override = DocumentEvent(
        id="override-ok",
        text="One. Two. Three. Four.",
        strategy=StrategyOverride(
            name="sentence", params={"chunk_size": 5, "tokenizer": "character"}
        ),
    )
    mixed = [good_records[0], *poison[:5], good_records[1], *poison[5:], *good_records[2:]]
    mixed += kafka_io.encode_documents([override])
    await kafka_io.produce_raw(kafka_bootstrap, settings.input_topic, mixed)

    done = asyncio.ensure_future(
        kafka_io.wait_committed_to_end(kafka_bootstrap, settings.group_id, settings.input_topic)
    )
    assert await run_worker_until(Worker(settings), done) == 0

    letters = await kafka_io.dead_letters(kafka_bootstrap, settings.dlq_topic)
    assert {dl.key: dl.error_kind for dl in letters} == expected_kinds
    by_key = {dl.key: dl for dl in letters}
    originals = {k: v for k, v, _ in poison}
    for key, dl in by_key.items():
        assert dl.value == originals[key], "dead letter must carry the original bytes"
        assert dl.source.topic == settings.input_topic
        assert dl.error_message
    assert (
        "`$.id`" in by_key[b"p-types"].error_message or "`id`" in by_key[b"p-types"].error_message
    )
    events = await kafka_io.chunk_events(kafka_bootstrap, settings.output_topic)
    check_complete([*good, override], events)
    override_chunks = [e for e in events if e.doc_id == "override-ok"]
    assert len(override_chunks) >= 4  # one per sentence at least; "Three." is cut at the cap
    assert all(len(e.text) <= 5 for e in override_chunks)


async def test_graceful_stop_then_restart_reprocesses_nothing(
    kafka_bootstrap: str, topic_names: dict[str, str], tmp_path: Path
) -> None:
    settings = kafka_io.make_settings(kafka_bootstrap, topic_names)
    await kafka_io.create(settings)
    first = make_docs(40, seed=1, prefix="a")
    await kafka_io.produce_raw(
        kafka_bootstrap, settings.input_topic, kafka_io.encode_documents(first)
    )
    proc = kafka_io.worker_process(settings, tmp_path / "worker.log")
    try:
        await kafka_io.wait_committed_to_end(
            kafka_bootstrap, settings.group_id, settings.input_topic
        )
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 60) == 0
    finally:
        proc.kill()
    second = make_docs(10, seed=2, prefix="b")
    await kafka_io.produce_raw(
        kafka_bootstrap, settings.input_topic, kafka_io.encode_documents(second)
    )
    proc = kafka_io.worker_process(settings, tmp_path / "worker.log")
    try:
        await kafka_io.wait_committed_to_end(
            kafka_bootstrap, settings.group_id, settings.input_topic
        )
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 60) == 0
    finally:
        proc.kill()
    events = await kafka_io.chunk_events(kafka_bootstrap, settings.output_topic)
    assert check_complete(first + second, events) == {}, "a graceful restart replayed documents"


async def test_sigkill_mid_stream_then_restart_loses_nothing(
    kafka_bootstrap: str, topic_names: dict[str, str], tmp_path: Path
) -> None:
    settings = kafka_io.make_settings(
        kafka_bootstrap, topic_names, strategy_params="chunk_size=80", commit_interval_ms=500
    )
    await kafka_io.create(settings)
    docs = make_docs(1500, seed=5)
    await kafka_io.produce_raw(
        kafka_bootstrap, settings.input_topic, kafka_io.encode_documents(docs)
    )
    log = tmp_path / "worker.log"
    proc = kafka_io.worker_process(settings, log)
    # Kill once output has started flowing, i.e. genuinely mid-stream.
    deadline = time.monotonic() + 60
    while True:
        ends = await kafka_io.end_offsets(kafka_bootstrap, settings.output_topic)
        if sum(ends.values()) > 500 or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.05)
    proc.kill()
    await asyncio.to_thread(proc.wait, 30)
    committed = await kafka_io.committed_offsets(kafka_bootstrap, settings.group_id)
    input_end = await kafka_io.end_offsets(kafka_bootstrap, settings.input_topic)
    assert sum(committed.values()) < sum(input_end.values()), "killed too late to be mid-stream"

    proc = kafka_io.worker_process(settings, log)
    try:
        await kafka_io.wait_committed_to_end(
            kafka_bootstrap, settings.group_id, settings.input_topic, timeout_s=120
        )
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 60) == 0
    finally:
        proc.kill()
    events = await kafka_io.chunk_events(kafka_bootstrap, settings.output_topic)
    check_complete(docs, events)  # duplicates allowed, but only as identical replays


async def test_two_workers_share_partitions_and_one_takes_over(
    kafka_bootstrap: str, topic_names: dict[str, str], tmp_path: Path
) -> None:
    settings = kafka_io.make_settings(kafka_bootstrap, topic_names)
    await kafka_io.create(settings, partitions=4)
    a_log, b_log = tmp_path / "a.log", tmp_path / "b.log"
    a = kafka_io.worker_process(settings, a_log)
    b = kafka_io.worker_process(settings, b_log)
    try:
        # Produce only once the group has settled with both members holding partitions.
        deadline = time.monotonic() + 60
        while True:
            a_parts = kafka_io.log_events(a_log, "partitions assigned")
            b_parts = kafka_io.log_events(b_log, "partitions assigned")
            if (
                a_parts
                and b_parts
                and len(a_parts[-1]["partitions"]) + len(b_parts[-1]["partitions"]) == 4
                and a_parts[-1]["partitions"]
                and b_parts[-1]["partitions"]
            ):
                break
            assert time.monotonic() < deadline, "the two members never shared the partitions"
            await asyncio.sleep(0.2)
        first = make_docs(200, seed=9, prefix="x")
        await kafka_io.produce_raw(
            kafka_bootstrap, settings.input_topic, kafka_io.encode_documents(first)
        )
        await kafka_io.wait_committed_to_end(
            kafka_bootstrap, settings.group_id, settings.input_topic, timeout_s=120
        )
        a.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(a.wait, 60) == 0
        # b takes over every partition after a leaves.
        deadline = time.monotonic() + 60
        while len(kafka_io.log_events(b_log, "partitions assigned")[-1]["partitions"]) != 4:
            assert time.monotonic() < deadline, "the survivor never took over"
            await asyncio.sleep(0.2)
        second = make_docs(100, seed=10, prefix="y")
        await kafka_io.produce_raw(
            kafka_bootstrap, settings.input_topic, kafka_io.encode_documents(second)
        )
        await kafka_io.wait_committed_to_end(
            kafka_bootstrap, settings.group_id, settings.input_topic, timeout_s=120
        )
        b.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(b.wait, 60) == 0
    finally:
        a.kill()
        b.kill()
    done_a = kafka_io.log_events(a_log, "stopped")[-1]["documents"]
    done_b = kafka_io.log_events(b_log, "stopped")[-1]["documents"]
    assert done_a > 0, "the first member processed nothing"
    assert done_b > 0, "the second member processed nothing"
    events = await kafka_io.chunk_events(kafka_bootstrap, settings.output_topic)
    check_complete(first + second, events)
