"""The people-facing commands against the real broker: produce, tail, lag, topics,
and local-kafka's idempotent start."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kafka import helpers
from worker.codec import decode_as
from worker.events import DocumentEvent
from worker.service import Worker

pytestmark = pytest.mark.kafka
REPO = Path(__file__).resolve().parents[2]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "worker.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )


async def test_topics_produce_run_tail_and_lag(
    kafka_bootstrap: str, topic_names: dict[str, str], tmp_path: Path
) -> None:
    names = topic_names
    made = await asyncio.to_thread(
        cli,
        "topics",
        "--bootstrap-servers",
        kafka_bootstrap,
        "--input-topic",
        names["input_topic"],
        "--output-topic",
        names["output_topic"],
        "--dlq-topic",
        names["dlq_topic"],
        "--group-id",  # names the state changelog: <group id>-document-state-changelog
        names["group_id"],
        "--partitions",
        "2",
    )
    assert made.returncode == 0, made.stderr
    assert f"{names['group_id']}-document-state-changelog (2)" in made.stdout
    notes = tmp_path / "notes.md"
    notes.write_text("# Title\n\nFirst sentence here. Second one follows.\n")
    plain = tmp_path / "plain.txt"
    plain.write_text("Just one line of plain text.")
    produced = await asyncio.to_thread(
        cli,
        "produce",
        "--bootstrap-servers",
        kafka_bootstrap,
        "--topic",
        names["input_topic"],
        str(notes),
        str(plain),
    )
    assert produced.returncode == 0, produced.stderr
    assert "produced 2 documents" in produced.stderr

    records = await helpers.read_all(kafka_bootstrap, names["input_topic"])
    docs = {d.id: d for d in (decode_as(r.value, list(r.headers), DocumentEvent) for r in records)}
    assert docs[str(notes)].content_type == "text/markdown"
    assert docs[str(plain)].content_type == "text/plain"
    assert docs[str(notes)].text == notes.read_text()

    settings = helpers.make_settings(kafka_bootstrap, names)
    worker = Worker(settings)
    task = asyncio.create_task(worker.run())
    try:
        await helpers.wait_committed_to_end(
            kafka_bootstrap, names["group_id"], names["input_topic"]
        )
    finally:
        worker.request_stop()
        assert await task == 0

    lag = await asyncio.to_thread(
        cli,
        "lag",
        "--bootstrap-servers",
        kafka_bootstrap,
        "--group",
        names["group_id"],
        "--topic",
        names["input_topic"],
        "--wait",
        "5",
    )
    assert lag.returncode == 0
    assert lag.stdout.count("lag=0") == 2
    tail = await asyncio.to_thread(
        cli,
        "tail",
        "--bootstrap-servers",
        kafka_bootstrap,
        "--topic",
        names["output_topic"],
        "--idle-timeout",
        "2",
    )
    assert tail.returncode == 0, tail.stderr
    assert f"{plain} #1/1 [0:28]" in tail.stdout
    assert "Just one line of plain text." in tail.stdout
    missing = await asyncio.to_thread(
        cli, "tail", "--bootstrap-servers", kafka_bootstrap, "--topic", "no-such-topic"
    )
    assert missing.returncode == 1
    assert "not found" in missing.stderr


def test_local_kafka_second_start_is_a_no_op(kafka_broker: tuple[str, Path | None]) -> None:
    kafka_bootstrap, run_dir = kafka_broker
    assert run_dir is not None, "needs the suite's own broker (unset CHUNKSTREAM_TEST_BOOTSTRAP)"
    pid_before = (run_dir / "broker.pid").read_text()
    again = subprocess.run(
        [str(REPO / "deploy/kafka/local-kafka"), "start", "--port", "1", "--dir", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert again.returncode == 0
    assert again.stdout.strip() == kafka_bootstrap  # still the running broker's address
    assert (run_dir / "broker.pid").read_text() == pid_before
    status = subprocess.run(
        [str(REPO / "deploy/kafka/local-kafka"), "status", "--dir", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert status.stdout.startswith("ready")
