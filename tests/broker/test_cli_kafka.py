"""The people-facing commands against the real broker: produce, tail, lag, topics, delete and
sink (a topic the cluster does not have is one line, exit 1, without waiting on it), the
warning about a misspelt setting, and local-kafka's idempotent start. (tail's decoding and
`--max`: tests/broker/test_cli_tail.py.)"""

from __future__ import annotations

import asyncio
import codecs
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from tests.support import kafka_io
from worker.app import Worker
from worker.wire.codec import decode_as
from worker.wire.events import DocumentEvent

pytestmark = pytest.mark.kafka
REPO = Path(__file__).resolve().parents[2]


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "worker.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )


def tail_into_a_closed_pipe(bootstrap: str, topic: str) -> tuple[int, bytes]:
    """``chunkstream tail`` whose stdout is closed before it prints: its status and stderr."""
    with subprocess.Popen(
        [sys.executable, "-m", "worker.cli", "tail", "--bootstrap-servers", bootstrap,
         "--topic", topic, "--idle-timeout", "30"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO,
    ) as proc:  # fmt: skip
        assert proc.stdout is not None
        assert proc.stderr is not None
        proc.stdout.close()
        stderr = proc.stderr.read()
        return proc.wait(timeout=120), stderr


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
    windows = tmp_path / "windows.txt"  # CRLF line ends and a UTF-8 byte-order mark
    windows.write_bytes(codecs.BOM_UTF8 + b"First line.\r\nSecond line.\r\n")
    produced = await asyncio.to_thread(
        cli,
        "produce",
        "--bootstrap-servers",
        kafka_bootstrap,
        "--topic",
        names["input_topic"],
        str(notes),
        str(plain),
        str(windows),
    )
    assert produced.returncode == 0, produced.stderr
    assert "produced 3 documents" in produced.stderr
    # stdin, told it is markdown (it has no suffix to go by).
    piped = await asyncio.to_thread(
        cli,
        "produce",
        "--bootstrap-servers",
        kafka_bootstrap,
        "--topic",
        names["input_topic"],
        "--id-prefix",
        "stdin:",
        "--content-type",
        "text/markdown",
        "-",
        stdin="# Piped\n\nFrom stdin.\n",
    )
    assert piped.returncode == 0, piped.stderr

    records = await kafka_io.read_all(kafka_bootstrap, names["input_topic"])
    docs = {d.id: d for d in (decode_as(r.value, list(r.headers), DocumentEvent) for r in records)}
    assert docs[str(notes)].content_type == "text/markdown"
    assert docs[str(plain)].content_type == "text/plain"
    assert docs[str(notes)].text == notes.read_text()
    # The file's own text: CRLF kept, the byte-order mark dropped.
    assert docs[str(windows)].text == "First line.\r\nSecond line.\r\n"
    assert docs["stdin:-"].text == "# Piped\n\nFrom stdin.\n"
    assert docs["stdin:-"].content_type == "text/markdown"

    settings = kafka_io.make_settings(kafka_bootstrap, names)
    worker = Worker(settings)
    task = asyncio.create_task(worker.run())
    try:
        await kafka_io.wait_committed_to_end(
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
    # `chunkstream tail … | head`: the reader gone before the first line ends tail quietly.
    status, stderr = await asyncio.to_thread(
        tail_into_a_closed_pipe, kafka_bootstrap, names["output_topic"]
    )
    assert stderr == b""
    assert status == 141
    missing = await asyncio.to_thread(
        cli, "tail", "--bootstrap-servers", kafka_bootstrap, "--topic", "no-such-topic"
    )
    assert missing.returncode == 1
    assert "not found" in missing.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["produce", "--topic", "{topic}", "README.md"],
        ["tail", "--topic", "{topic}", "--idle-timeout", "60"],
        ["tail", "--topic", "{topic}", "--json", "--max", "1"],
        ["lag", "--topic", "{topic}", "--wait", "60"],
        ["delete", "--topic", "{topic}", "doc-1"],
        ["sink", "--topic", "{topic}", "--db", "{db}", "--idle-timeout", "60"],
    ],
    ids=lambda command: "-".join(c for c in command[:4] if "{" not in c),
)
async def test_a_topic_the_cluster_does_not_have_is_one_line_and_status_1(
    command: list[str], kafka_bootstrap: str, tmp_path: Path
) -> None:
    topic = f"no-such-topic-{uuid.uuid4().hex[:8]}"
    db = tmp_path / "sink.db"
    argv = [part.format(topic=topic, db=db) for part in command]
    began = time.monotonic()
    result = await asyncio.to_thread(cli, *argv, "--bootstrap-servers", kafka_bootstrap)
    elapsed = time.monotonic() - began
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == (
        f"chunkstream: topic {topic!r} not found on {kafka_bootstrap} (or not visible to this "
        "client): check --topic, or create it with `chunkstream topics`\n"
    )
    # Asked before any client waits on the topic: aiokafka waits for a missing topic's
    # metadata for its 40 s request timeout (and ignored --idle-timeout and --wait meanwhile).
    # Not a speed figure: a bound well under that wait, far above a normal run.
    assert elapsed < 30
    assert not db.exists()  # the sink made no database for a topic it cannot read
    # Nothing was created on the way (brokers may auto-create a topic asked for by name).
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        existing = await admin.list_topics()
    finally:
        await admin.close()
    assert len(existing) > 0
    assert topic not in existing


async def test_a_misspelt_setting_is_a_warning_naming_the_setting_meant(
    kafka_bootstrap: str, topic_names: dict[str, str], tmp_path: Path
) -> None:
    """The issue: CHUNKSTREAM_STRATEGIE=lexical was ignored without a word (the worker ran
    `sentence`). It is still not a setting, but the worker says so at start-up, and so does
    every other command."""
    settings = kafka_io.make_settings(kafka_bootstrap, topic_names)
    await kafka_io.create(settings, partitions=1)
    document = DocumentEvent(id="doc-1", text="# Title\n\nOne sentence. Another one.")
    await kafka_io.produce_raw(
        kafka_bootstrap, topic_names["input_topic"], kafka_io.encode_documents([document])
    )
    log = tmp_path / "worker.log"
    worker = kafka_io.worker_process(settings, log, {"CHUNKSTREAM_STRATEGIE": "lexical"})
    try:
        await kafka_io.wait_committed_to_end(
            kafka_bootstrap, topic_names["group_id"], topic_names["input_topic"], timeout_s=120
        )
    finally:
        worker.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(worker.wait, 120) == 0
    warning = (
        "CHUNKSTREAM_STRATEGIE is not a chunkstream setting; ignored "
        "(did you mean CHUNKSTREAM_STRATEGY?)"
    )
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    warned = [line for line in lines if line["message"] == warning]
    assert [(w["level"], w["logger"]) for w in warned] == [("warning", "worker.config")]
    assert lines.index(warned[0]) < lines.index(kafka_io.log_events(log, "starting")[0])
    assert kafka_io.log_events(log, "starting")[0]["config"]["strategy"] == "sentence"
    chunks = await kafka_io.chunk_events(kafka_bootstrap, topic_names["output_topic"])
    assert {c.strategy for c in chunks} == {"sentence"}  # a warning, not a setting

    env = {k: v for k, v in os.environ.items() if not k.startswith("CHUNKSTREAM_")}
    lag = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "worker.cli", "lag", "--bootstrap-servers", kafka_bootstrap,
         "--topic", topic_names["input_topic"]],
        capture_output=True, text=True, cwd=REPO, timeout=120,
        env={**env, "CHUNKSTREAM_STRATEGIE": "lexical", "CHUNKSTREAM_TEST_BOOTSTRAP": "x:1"},
    )  # fmt: skip
    assert lag.returncode == 0
    assert lag.stderr == f"chunkstream: warning: {warning}\n"  # ours, not a setting: no warning


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
