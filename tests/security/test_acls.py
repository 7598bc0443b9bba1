"""The worker with only the ACLs the docs and the manifests grant it, on a broker with Kafka's
ACL authorizer: the Strimzi KafkaUser's ACLs (deploy/k8s/overlays/strimzi), renamed to the
test's topics and group, are enough to chunk documents to the end under at-least-once, with the
start-up checks of the written topics' configs done, not skipped; with exactly-once, so is that
set plus the transactional-id ACL of docs/operating/security.md. The grants are made with
Kafka's own `kafka-acls` tool (org.apache.kafka.tools.AclCommand from the broker jars)."""

from __future__ import annotations

import asyncio
import re
import signal
from pathlib import Path

import pytest

from tests.support import kafka_io
from tests.support import manifests as m
from tests.support.generated_docs import check_complete, make_docs
from tests.support.paths import REPO
from tests.support.private_broker import kafka_tool
from tests.support.secure_broker import (
    USER,
    SecureBroker,
    create_topics,
    fatal_line,
    run_to_exit,
    secure_env,
    spawn,
)
from worker.kafka.clients import create_topics as create_topics_as_admin
from worker.kafka.clients import worker_topics

pytestmark = pytest.mark.kafka

SKIPPED_CHECKS = (
    "could not read the topics' max.message.bytes",
    "could not read the state topic's config",
)


def strimzi_grants(names: dict[str, str]) -> list[tuple[str, str, str, list[str]]]:
    """The Strimzi KafkaUser's ACLs as (resource type, name, pattern type, operations), its
    names replaced by the test's (every one of them must have a counterpart here)."""
    objs = m.render("strimzi")
    env = m.container_env(objs, "chunkstream-0")
    group = env["CHUNKSTREAM_GROUP_ID"]
    renamed = {
        ("group", group): names["group_id"],
        ("topic", env["CHUNKSTREAM_INPUT_TOPIC"]): names["input_topic"],
        ("topic", env["CHUNKSTREAM_OUTPUT_TOPIC"]): names["output_topic"],
        ("topic", env["CHUNKSTREAM_DLQ_TOPIC"]): names["dlq_topic"],
        ("topic", f"{group}-document-state-changelog"): state_topic(names),
    }
    user = m.one(objs, "KafkaUser")
    grants = []
    for acl in user["spec"]["authorization"]["acls"]:
        resource = acl["resource"]
        key = (resource["type"], resource["name"])
        assert key in renamed, f"an ACL this test does not know: {key}"
        grants.append((key[0], renamed[key], resource["patternType"], acl["operations"]))
    return grants


def transactional_grant(names: dict[str, str]) -> tuple[str, str, str, list[str]]:
    """security.md's exactly-once row: Write and Describe on the prefix chunkstream-<group>-."""
    page = (REPO / "docs" / "operating" / "security.md").read_text(encoding="utf-8")
    row = next(line for line in page.splitlines() if "the transactional ids starting" in line)
    assert "`chunkstream-<group id>-` (a prefixed ACL)" in row
    operations = re.search(r"\| (Write, Describe):", row)
    assert operations is not None, row
    prefix = f"chunkstream-{names['group_id']}-"
    return ("transactional-id", prefix, "prefixed", operations.group(1).split(", "))


def state_topic(names: dict[str, str]) -> str:
    return f"{names['group_id']}-document-state-changelog"


def grant(sb: SecureBroker, grants: list[tuple[str, str, str, list[str]]]) -> None:
    for kind, name, pattern, operations in grants:
        kafka_tool(
            "org.apache.kafka.tools.AclCommand",
            "--bootstrap-server", sb.broker.bootstrap,
            "--add", "--allow-principal", f"User:{USER}",
            f"--{kind}", name, "--resource-pattern-type", pattern,
            *(arg for op in operations for arg in ("--operation", op)),
        )  # fmt: skip


async def run_to_the_end(
    sb: SecureBroker, names: dict[str, str], tmp_path: Path, **settings: str
) -> Path:
    """Documents in, the worker with the environment given, until every offset is committed;
    the worker's log. It exits 0 on SIGTERM, and every document is chunked."""
    await create_topics(sb, names)
    docs = make_docs(30, seed=61)
    await kafka_io.produce_raw(
        sb.broker.bootstrap, names["input_topic"], kafka_io.encode_documents(docs)
    )
    env = secure_env(sb, names, tmp_path)
    env.update({f"CHUNKSTREAM_{k.upper()}": v for k, v in settings.items()})
    log = tmp_path / "worker.log"
    proc = spawn(env, log)
    try:
        await kafka_io.wait_committed_to_end(
            sb.broker.bootstrap, names["group_id"], names["input_topic"], 120
        )
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 60) == 0, log.read_text()[-3000:]
    finally:
        proc.kill()
    events = await kafka_io.chunk_events(sb.broker.bootstrap, names["output_topic"])
    check_complete(docs, events)
    return log


async def test_the_strimzi_acls_are_enough_and_leave_no_start_up_check_skipped(
    acl_broker: SecureBroker, topic_names: dict[str, str], tmp_path: Path
) -> None:
    grant(acl_broker, strimzi_grants(topic_names))
    log = await run_to_the_end(acl_broker, topic_names, tmp_path)
    for message in SKIPPED_CHECKS:
        assert not kafka_io.log_events(log, message), message


async def test_exactly_once_needs_only_the_transactional_id_prefix_besides(
    acl_broker: SecureBroker, topic_names: dict[str, str], tmp_path: Path
) -> None:
    grant(acl_broker, [*strimzi_grants(topic_names), transactional_grant(topic_names)])
    log = await run_to_the_end(
        acl_broker, topic_names, tmp_path, processing_guarantee="exactly-once"
    )
    assert not kafka_io.log_events(log, "transaction failed; stopping the worker")


async def test_exactly_once_without_the_transactional_id_acl_stops_naming_it(
    acl_broker: SecureBroker, topic_names: dict[str, str], tmp_path: Path
) -> None:
    grant(acl_broker, strimzi_grants(topic_names))
    await create_topics(acl_broker, topic_names)
    await kafka_io.produce_raw(
        acl_broker.broker.bootstrap,
        topic_names["input_topic"],
        kafka_io.encode_documents(make_docs(5, seed=62)),
    )
    env = secure_env(acl_broker, topic_names, tmp_path)
    env["CHUNKSTREAM_PROCESSING_GUARANTEE"] = "exactly-once"
    log = tmp_path / "worker.log"
    assert await run_to_exit(env, log) == 2  # a configuration error, not a retry loop
    last = fatal_line(log)
    assert last.startswith("chunkstream:"), last
    assert "transactional id" in last, last
    assert "docs/operating/security.md#acls" in last, last
    assert not await kafka_io.committed_offsets(
        acl_broker.broker.bootstrap, topic_names["group_id"]
    )


async def test_a_topic_the_user_may_not_write_stops_the_worker_naming_the_acls(
    acl_broker: SecureBroker, topic_names: dict[str, str], tmp_path: Path
) -> None:
    output = topic_names["output_topic"]
    grants = [
        (kind, name, pattern, [op for op in ops if not (name == output and op == "Write")])
        for kind, name, pattern, ops in strimzi_grants(topic_names)
    ]
    grant(acl_broker, grants)
    await create_topics(acl_broker, topic_names)
    await kafka_io.produce_raw(
        acl_broker.broker.bootstrap,
        topic_names["input_topic"],
        kafka_io.encode_documents(make_docs(5, seed=63)),
    )
    log = tmp_path / "worker.log"
    assert await run_to_exit(secure_env(acl_broker, topic_names, tmp_path), log) == 2
    last = fatal_line(log)
    assert "a topic" in last, last
    assert output in last, last
    assert "docs/operating/security.md#acls" in last, last
    # Nothing was skipped: the documents are still to do (their offsets not committed).
    assert not await kafka_io.committed_offsets(
        acl_broker.broker.bootstrap, topic_names["group_id"]
    )


async def test_a_state_topic_the_user_may_not_create_is_waited_for_naming_the_grant(
    acl_broker: SecureBroker, topic_names: dict[str, str], tmp_path: Path
) -> None:
    """Creation allowed (the default) but not granted: the worker does not exit; it waits for
    the state topic, saying how to grant Create or switch the creation off, and goes on once
    something else (here an administrator, in a cluster a topic operator) creates it."""
    grant(acl_broker, strimzi_grants(topic_names))  # no Create
    settings = kafka_io.make_settings(acl_broker.broker.bootstrap, topic_names)
    topics, configs = worker_topics(settings, 2)
    changelog = state_topic(topic_names)
    await create_topics_as_admin(
        settings, {t: n for t, n in topics.items() if t != changelog}, configs=configs
    )
    docs = make_docs(10, seed=64)
    await kafka_io.produce_raw(
        acl_broker.broker.bootstrap, topic_names["input_topic"], kafka_io.encode_documents(docs)
    )
    env = secure_env(acl_broker, topic_names, tmp_path)
    log = tmp_path / "worker.log"
    proc = spawn(env, log)
    try:
        waiting = await kafka_io.wait_for_log(log, "waiting for topics", timeout_s=120)
        assert waiting["missing"] == [changelog]
        assert "refused by the broker's ACLs" in waiting["reason"]
        assert "CHUNKSTREAM_CREATE_STATE_TOPIC=false" in waiting["reason"]
        await asyncio.sleep(3)
        assert proc.poll() is None, "the worker exited instead of waiting"
        await create_topics_as_admin(
            settings, {changelog: topics[changelog]}, configs={changelog: configs[changelog]}
        )
        await kafka_io.wait_committed_to_end(
            acl_broker.broker.bootstrap, topic_names["group_id"], topic_names["input_topic"], 120
        )
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 60) == 0, log.read_text()[-3000:]
    finally:
        proc.kill()
    check_complete(
        docs, await kafka_io.chunk_events(acl_broker.broker.bootstrap, topic_names["output_topic"])
    )
