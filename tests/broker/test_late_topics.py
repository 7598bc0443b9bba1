"""Topics that appear after the worker starts (issue 45): a first deployment in which the broker is
up before the topics exist must not crash-loop. The worker waits, alive and unready, with the
missing topics named by ``/readyz``, the log and ``chunkstream_missing_topics``; it creates its
own state changelog (compacted, the input's partition count) unless told not to, and then waits
for that too."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from tests.support import kafka_io
from tests.support.lifecycle_changelog import PARAMS, changelog, produce
from tests.support.network import free_port, port_accepts, until
from tests.support.network import try_get as http_get
from tests.support.private_broker import PrivateBroker
from worker.config import Settings, state_topic
from worker.kafka.clients import create_topics, worker_topics

pytestmark = pytest.mark.kafka


def readiness(port: int) -> dict[str, object]:
    status, body = http_get(port, "/readyz") or (0, "{}")
    checks: dict[str, object] = json.loads(body)
    checks["status"] = status
    return checks


def metric(port: int, name: str) -> float | None:
    _, body = http_get(port, "/metrics") or (0, "")
    for line in body.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


async def describe(bootstrap: str, topic: str) -> tuple[int, str | None]:
    """A topic's partition count and cleanup.policy."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        (described,) = await admin.describe_topics([topic])
        (response,) = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, configs={"cleanup.policy": None})]
        )
        entries = {entry[0]: entry[1] for entry in response.resources[0][4]}
        return len(described["partitions"]), entries.get("cleanup.policy")
    finally:
        await admin.close()


@pytest.mark.timeout(900)
async def test_topics_created_after_the_broker_came_up_are_waited_for(
    tmp_path: Path, topic_names: dict[str, str]
) -> None:
    """The issue's reproduction: the worker starts with the broker down, the broker starts, and
    `chunkstream topics` runs a second or two after it accepts connections."""
    broker = PrivateBroker(tmp_path / "broker")
    port = free_port()
    settings = kafka_io.make_settings(
        broker.bootstrap,
        topic_names,
        strategy="sentence",
        strategy_params=PARAMS,
        metrics_host="127.0.0.1",
        metrics_port=str(port),
    )
    records, _ = changelog(200, documents=60, seed=45)
    log = tmp_path / "worker.log"
    proc = kafka_io.worker_process(settings, log)
    try:
        await until(lambda: http_get(port, "/readyz") is not None, 120, "the health server")
        starting = asyncio.create_task(asyncio.to_thread(broker.start))
        await until(lambda: port_accepts(broker.port), 300, "the broker accepting connections")
        await asyncio.sleep(1.5)
        created = await asyncio.to_thread(
            subprocess.run,
            [
                sys.executable, "-m", "worker.cli", "topics",
                "--bootstrap-servers", broker.bootstrap, "--partitions", "3",
                "--input-topic", settings.input_topic, "--output-topic", settings.output_topic,
                "--dlq-topic", settings.dlq_topic, "--group-id", settings.group_id,
            ],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert created.returncode == 0, created.stderr
        await starting
        await until(lambda: readiness(port)["status"] == 200, 180, "ready")
        assert proc.poll() is None, "the worker exited"
        await produce(broker.bootstrap, settings.input_topic, records)
        await kafka_io.wait_committed_to_end(
            broker.bootstrap, settings.group_id, settings.input_topic, timeout_s=180
        )
        assert proc.poll() is None
    finally:
        proc.terminate()
        code = await asyncio.to_thread(proc.wait, 90)
        await asyncio.to_thread(broker.stop)
    assert code == 0, log.read_text()[-3000:]


async def _only_user_topics(settings: Settings) -> None:
    """The input, output and dead-letter topics (3 input partitions), not the changelog."""
    topics, configs = worker_topics(settings, 3)
    del topics[state_topic(settings)]
    await create_topics(settings, topics, configs=configs)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("allowed", [True, False])
async def test_the_worker_creates_its_state_topic_or_waits_for_it_when_told_not_to(
    kafka_bootstrap: str, topic_names: dict[str, str], tmp_path: Path, allowed: bool
) -> None:
    port = free_port()
    settings = kafka_io.make_settings(
        kafka_bootstrap,
        topic_names,
        strategy="sentence",
        strategy_params=PARAMS,
        metrics_host="127.0.0.1",
        metrics_port=str(port),
        create_state_topic=str(allowed).lower(),
    )
    changelog_topic = state_topic(settings)
    records, _ = changelog(120, documents=40, seed=46)
    log = tmp_path / "worker.log"
    proc = kafka_io.worker_process(settings, log)
    try:
        # Nothing exists yet: every topic is waited for and named.
        await until(lambda: readiness(port).get("topics_missing"), 120, "the missing topics")
        missing = readiness(port)["topics_missing"]
        assert isinstance(missing, list)
        assert settings.input_topic in missing
        assert settings.output_topic in missing
        assert readiness(port)["status"] == 503
        assert (metric(port, "chunkstream_missing_topics") or 0) >= 3

        await _only_user_topics(settings)
        if not allowed:
            await until(
                lambda: readiness(port).get("topics_missing") == [changelog_topic],
                120,
                "only the changelog missing",
            )
            waits = kafka_io.log_events(log, "waiting for topics")
            assert waits[-1]["missing"] == [changelog_topic]
            assert "CHUNKSTREAM_STATE_TOPIC" in waits[-1]["reason"]
            await asyncio.sleep(3)  # it is not created behind the operator's back
            assert readiness(port).get("topics_missing") == [changelog_topic]
            _, configs = worker_topics(settings, 3)
            await create_topics(
                settings, {changelog_topic: 3}, configs={changelog_topic: configs[changelog_topic]}
            )
        await until(lambda: readiness(port)["status"] == 200, 120, "ready")
        assert metric(port, "chunkstream_missing_topics") == 0
        assert await describe(kafka_bootstrap, changelog_topic) == (3, "compact")
        assert bool(kafka_io.log_events(log, "state topic created")) == allowed
        await produce(kafka_bootstrap, settings.input_topic, records)
        await kafka_io.wait_committed_to_end(
            kafka_bootstrap, settings.group_id, settings.input_topic, timeout_s=120
        )
        assert proc.poll() is None
    finally:
        proc.terminate()
        code = await asyncio.to_thread(proc.wait, 90)
    assert code == 0, log.read_text()[-3000:]
