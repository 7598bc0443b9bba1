"""Kafka client construction from settings: the one place that knows aiokafka's keywords."""

from __future__ import annotations

import ssl
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.conn import collect_hosts, create_conn
from aiokafka.errors import KafkaError, SaslAuthenticationFailed, UnsupportedSaslMechanismError
from aiokafka.helpers import create_ssl_context

from worker.config import Settings, state_topic
from worker.resources import fetch_max_bytes


def connection_options(settings: Settings) -> dict[str, Any]:
    """Bootstrap, client id and security keywords shared by every client we create."""
    options: dict[str, Any] = {
        "bootstrap_servers": settings.bootstrap_servers,
        "client_id": settings.client_id,
        "security_protocol": settings.security_protocol,
    }
    if settings.security_protocol in ("SSL", "SASL_SSL"):
        options["ssl_context"] = create_ssl_context(
            cafile=settings.ssl_cafile,
            certfile=settings.ssl_certfile,
            keyfile=settings.ssl_keyfile,
        )
    if settings.security_protocol.startswith("SASL"):
        options["sasl_mechanism"] = settings.sasl_mechanism
        options["sasl_plain_username"] = settings.sasl_username
        options["sasl_plain_password"] = settings.sasl_password
    return options


def make_consumer(settings: Settings) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        group_id=settings.group_id,
        group_instance_id=settings.group_instance_id,
        enable_auto_commit=False,
        auto_offset_reset=settings.auto_offset_reset,
        session_timeout_ms=settings.session_timeout_ms,
        heartbeat_interval_ms=settings.heartbeat_interval_ms,
        rebalance_timeout_ms=settings.rebalance_timeout_ms,
        max_poll_interval_ms=settings.max_poll_interval_ms,
        # A single record may be as large as the document limit; the fetch must admit it. A
        # response brings at most the in-flight window (worker/resources.py: the memory bound).
        max_partition_fetch_bytes=max(1024 * 1024, settings.max_document_bytes + 64 * 1024),
        fetch_max_bytes=fetch_max_bytes(settings),
        isolation_level="read_committed",
        **connection_options(settings),
    )


def make_producer(settings: Settings) -> AIOKafkaProducer:
    return AIOKafkaProducer(
        acks="all",
        enable_idempotence=True,
        compression_type=None if settings.compression_type == "none" else settings.compression_type,
        linger_ms=settings.linger_ms,
        max_request_size=settings.max_record_bytes,
        # A record larger than this still goes out, alone in its batch.
        max_batch_size=settings.batch_size,
        **connection_options(settings),
    )


# The state changelog is compacted: the latest state per document is all a restore needs,
# and a document's tombstone removes it entirely (Kafka Streams' changelog configuration).
COMPACTED = {"cleanup.policy": "compact"}


def worker_topics(
    settings: Settings, partitions: int
) -> tuple[dict[str, int], dict[str, dict[str, str]]]:
    """The topics a worker with ``settings`` needs (name → partitions) and their configs:
    input and output with ``partitions``, the dead letters with one, the state changelog
    co-partitioned with the input and compacted, the documents topic when configured."""
    topics = {
        settings.input_topic: partitions,
        settings.output_topic: partitions,
        settings.dlq_topic: 1,
    }
    configs: dict[str, dict[str, str]] = {}
    if settings.document_lifecycle:
        topics[state_topic(settings)] = partitions
        configs[state_topic(settings)] = COMPACTED
    if settings.documents_topic is not None:
        topics[settings.documents_topic] = partitions
        configs[settings.documents_topic] = COMPACTED
    return topics, configs


async def create_topics(
    settings: Settings,
    topics: dict[str, int],
    *,
    max_message_bytes: int | None = None,
    configs: dict[str, dict[str, str]] | None = None,
) -> None:
    """Create topics that do not exist yet (``{name: partitions}``, ``configs`` per name),
    replication factor 1 unless the cluster says otherwise. Used by the demo, tests and
    `chunkstream topics`."""
    admin = AIOKafkaAdminClient(**connection_options(settings))
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        shared = {"max.message.bytes": str(max_message_bytes)} if max_message_bytes else {}
        new = [
            NewTopic(name, partitions, 1, topic_configs={**shared, **(configs or {}).get(name, {})})
            for name, partitions in topics.items()
            if name not in existing
        ]
        if new:
            await admin.create_topics(new)
    finally:
        await admin.close()


async def topic_configs(
    settings: Settings, topics: list[str], names: list[str]
) -> dict[str, dict[str, str]]:
    """The configs ``names`` of each topic (topic → name → value), as far as the broker says."""
    admin = AIOKafkaAdminClient(**connection_options(settings))
    await admin.start()
    try:
        responses = await admin.describe_configs(
            [
                ConfigResource(ConfigResourceType.TOPIC, t, configs=dict.fromkeys(names))
                for t in topics
            ]
        )
    finally:
        await admin.close()
    found: dict[str, dict[str, str]] = {}
    for response in responses:
        for resource in response.to_object()["resources"]:
            for entry in resource["config_entries"] if resource["error_code"] == 0 else ():
                if entry["config_names"] in names:
                    topic = found.setdefault(resource["resource_name"], {})
                    topic[entry["config_names"]] = entry["config_value"]
    return found


async def topic_record_limits(settings: Settings, topics: list[str]) -> dict[str, int]:
    """``max.message.bytes`` of each topic, as far as the broker tells us."""
    configs = await topic_configs(settings, topics, ["max.message.bytes"])
    return {t: int(c["max.message.bytes"]) for t, c in configs.items() if c}


async def diagnose_connection(settings: Settings) -> str:
    """Why the clients could not bootstrap, as one sentence naming the settings to fix.

    Called after a client's start-up failed: aiokafka only says "Unable to bootstrap", so
    this connects once more, by hand, to each bootstrap server and classifies the error
    (credentials, TLS trust, address). Secrets are never part of the message."""
    options = connection_options(settings)
    servers = settings.bootstrap_servers
    error: BaseException | None = None
    for host, port, _family in collect_hosts(servers, randomize=False):
        try:
            conn = await create_conn(
                host,
                port,
                client_id=settings.client_id,
                request_timeout_ms=15_000,
                ssl_context=options.get("ssl_context"),
                security_protocol=settings.security_protocol,
                sasl_mechanism=options.get("sasl_mechanism", "PLAIN"),
                sasl_plain_username=settings.sasl_username,
                sasl_plain_password=settings.sasl_password,
            )
        except (OSError, KafkaError, TimeoutError) as exc:
            error = exc
            continue
        conn.close()
        return (
            f"could not bootstrap from {servers}, although {host}:{port} accepts a connection "
            "now (a broker restarting?); check CHUNKSTREAM_BOOTSTRAP_SERVERS"
        )
    if isinstance(error, SaslAuthenticationFailed):
        return (
            f"SASL authentication failed at {servers} for user {settings.sasl_username!r} "
            f"({settings.sasl_mechanism}): check CHUNKSTREAM_SASL_USERNAME and "
            "CHUNKSTREAM_SASL_PASSWORD (or CHUNKSTREAM_SASL_PASSWORD_FILE)"
        )
    if isinstance(error, UnsupportedSaslMechanismError):
        return (
            f"the brokers at {servers} do not offer SASL mechanism {settings.sasl_mechanism}: "
            "check CHUNKSTREAM_SASL_MECHANISM"
        )
    if isinstance(error, ssl.SSLCertVerificationError):
        return (
            f"TLS certificate verification failed at {servers} ({error.verify_message}): "
            "check CHUNKSTREAM_SSL_CAFILE (the CA that signed the brokers' certificates) and "
            "that CHUNKSTREAM_BOOTSTRAP_SERVERS names a host in those certificates"
        )
    if isinstance(error, ssl.SSLError):
        return (
            f"TLS handshake failed at {servers} ({error}): check CHUNKSTREAM_SECURITY_PROTOCOL "
            "(is this a TLS listener?) and CHUNKSTREAM_SSL_CAFILE/SSL_CERTFILE/SSL_KEYFILE"
        )
    return (
        f"cannot connect to the Kafka brokers at {servers} ({error!r}): check "
        "CHUNKSTREAM_BOOTSTRAP_SERVERS and CHUNKSTREAM_SECURITY_PROTOCOL"
    )


# -- the command-line tools' clients ------------------------------------------------------------


def make_document_producer(settings: Settings, *, max_request_size: int) -> AIOKafkaProducer:
    """The producer of ``chunkstream produce``: acks=all, records up to ``max_request_size``."""
    return AIOKafkaProducer(
        acks="all", max_request_size=max_request_size, **connection_options(settings)
    )


def make_reader(settings: Settings, *topics: str) -> AIOKafkaConsumer:
    """A consumer in no group that reads from the beginning and commits nothing (tail, lag)."""
    return AIOKafkaConsumer(
        *topics,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **connection_options(settings),
    )


def make_changelog_reader(settings: Settings) -> AIOKafkaConsumer:
    """The worker's reader of its state changelog: assigned partitions by hand (no group),
    nothing committed; a fetch brings at most 8 MiB (restores are paced by the local store)."""
    return AIOKafkaConsumer(
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_bytes=8 * 1024 * 1024,
        max_partition_fetch_bytes=1024 * 1024,
        **connection_options(settings),
    )


def make_sink_consumer(settings: Settings, topic: str, group_id: str) -> AIOKafkaConsumer:
    """The reference sink's consumer: a group (it resumes where it left), commits by hand after
    its writes, from the beginning the first time, committed records only."""
    return AIOKafkaConsumer(
        topic,
        group_id=group_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        **connection_options(settings),
    )


def make_admin(settings: Settings) -> AIOKafkaAdminClient:
    return AIOKafkaAdminClient(**connection_options(settings))
