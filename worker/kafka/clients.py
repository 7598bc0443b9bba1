"""Kafka client construction from settings: the one place that knows aiokafka's keywords."""

from __future__ import annotations

import asyncio
import errno
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.conn import collect_hosts, create_conn
from aiokafka.errors import (
    KafkaConnectionError,
    KafkaError,
    SaslAuthenticationFailed,
    UnsupportedSaslMechanismError,
)
from aiokafka.helpers import create_ssl_context

from worker.config import Settings, batch_bytes, exactly_once, read_password_file, state_topic
from worker.errors import ConfigError
from worker.kafka.link_policy import Failure, Kind
from worker.runtime.resources import fetch_max_bytes


def sasl_password(settings: Settings) -> str | None:
    """The SASL password as of now: the password file read again (a rotated Secret), else the
    one read at start-up (also when the file cannot be read at this moment)."""
    if settings.sasl_password_file:
        try:
            return read_password_file(settings.sasl_password_file)
        except ConfigError:
            pass
    return settings.sasl_password


def connection_options(settings: Settings) -> dict[str, Any]:
    """Bootstrap, client id and security keywords shared by every client we create; the SASL
    password file is read again for each."""
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
        options["sasl_plain_password"] = sasl_password(settings)
    return options


def renew_password(settings: Settings, *owners: Any) -> bool:
    """Hand the password file's current content to running clients (consumers, producers,
    :class:`~worker.kafka.producers.RenewingProducer`): every connection they open from now on
    authenticates with it. True if it changed.

    aiokafka reads ``sasl_plain_password`` from its client object for each new connection
    and has no public setter; ``tests/security`` holds that attribute to its name."""
    if not settings.sasl_password_file:
        return False
    password = sasl_password(settings)
    changed = False
    for owner in owners:
        owner = getattr(owner, "current", owner)  # a RenewingProducer: its producer now
        client = getattr(owner, "client", None) or getattr(owner, "_client", None)
        if client is not None and client._sasl_plain_password != password:
            client._sasl_plain_password = password
            changed = True
    return changed


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
        # response brings at most the in-flight window (worker/runtime/resources.py: the memory
        # bound).
        max_partition_fetch_bytes=max(1024 * 1024, settings.max_document_bytes + 64 * 1024),
        fetch_max_bytes=fetch_max_bytes(settings),
        isolation_level="read_committed",
        **connection_options(settings),
    )


def make_producer(settings: Settings, *, transactional_id: str | None = None) -> AIOKafkaProducer:
    """The worker's producer; with a ``transactional_id``, one input partition's transactional
    producer (worker.kafka.transactions): its start fences every earlier producer of that id."""
    transactional: dict[str, Any] = {}
    if transactional_id is not None:
        transactional = {
            "transactional_id": transactional_id,
            # An open transaction holds back every read_committed reader of the partitions it
            # wrote; one left by a member that died is aborted by the broker after this long.
            "transaction_timeout_ms": transaction_timeout_ms(settings),
        }
    return AIOKafkaProducer(
        acks="all",
        enable_idempotence=True,
        compression_type=None if settings.compression_type == "none" else settings.compression_type,
        linger_ms=settings.linger_ms,
        max_request_size=settings.max_record_bytes,
        # A record larger than this still goes out, alone in its batch.
        max_batch_size=batch_bytes(settings),
        **transactional,
        **connection_options(settings),
    )


# How long the broker lets a transaction stay open before it aborts it, at the least: short
# enough that read_committed consumers barely notice the stall when a member dies with a
# transaction open and nobody takes its partitions over.
TRANSACTION_TIMEOUT_MS = 60_000
# Kafka's default transaction.max.timeout.ms: a broker refuses a producer asking for longer.
TRANSACTION_MAX_TIMEOUT_MS = 900_000
# Beyond the commit interval and the cut's wait: the loop's turn to the commit (a fetch wait)
# and the commit's own round trips.
_TRANSACTION_SLACK_MS = 10_000


def transaction_timeout_ms(settings: Settings) -> int:
    """The transaction timeout of a partition's producer: longer than a transaction of this
    configuration stays open when all is well (from its first write, at most a commit interval
    to the commit, whose cut waits up to the drain timeout for the documents in flight), so
    the broker never aborts a healthy one; at least :data:`TRANSACTION_TIMEOUT_MS`, and at
    most what a broker with default settings accepts."""
    longest = settings.commit_interval_ms + int(settings.drain_timeout_s * 1000)
    wanted = max(TRANSACTION_TIMEOUT_MS, longest + _TRANSACTION_SLACK_MS)
    return min(TRANSACTION_MAX_TIMEOUT_MS, wanted)


# The state changelog is compacted: the latest state per document is all a restore needs,
# and a document's tombstone removes it entirely (Kafka Streams' changelog configuration).
COMPACTED = {"cleanup.policy": "compact"}


@dataclass(frozen=True)
class WorkerTopic:
    """A topic the worker uses, as its settings name it."""

    name: str
    setting: str  # the CHUNKSTREAM_ variable that names it
    written: bool  # the worker produces to it (the input is only read)
    co_partitioned: bool  # as many partitions as the input (else one)
    config: Mapping[str, str] = field(default_factory=dict)


def topics_used(settings: Settings) -> list[WorkerTopic]:
    """Every topic a worker with ``settings`` reads or writes, the input first: input and
    output, the dead letters, the state changelog (co-partitioned with the input and
    compacted) and the documents topic when configured. The one list that creating the topics,
    checking them at start-up and learning their metadata all read."""
    used = [
        WorkerTopic(settings.input_topic, "INPUT_TOPIC", written=False, co_partitioned=True),
        WorkerTopic(settings.output_topic, "OUTPUT_TOPIC", written=True, co_partitioned=True),
        WorkerTopic(settings.dlq_topic, "DLQ_TOPIC", written=True, co_partitioned=False),
    ]
    if settings.document_lifecycle:
        used.append(WorkerTopic(state_topic(settings), "STATE_TOPIC", True, True, COMPACTED))
    if settings.documents_topic is not None:
        used.append(WorkerTopic(settings.documents_topic, "DOCUMENTS_TOPIC", True, True, COMPACTED))
    return used


def written_topics(settings: Settings) -> list[str]:
    """Every topic the worker produces to."""
    return [t.name for t in topics_used(settings) if t.written]


def worker_topics(
    settings: Settings, partitions: int
) -> tuple[dict[str, int], dict[str, dict[str, str]]]:
    """The topics a worker with ``settings`` needs (name → partitions) and their configs, for
    :func:`create_topics`: the co-partitioned ones with ``partitions``, the others with one."""
    used = topics_used(settings)
    topics = {t.name: partitions if t.co_partitioned else 1 for t in used}
    configs = {t.name: dict(t.config) for t in used if t.config}
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


@dataclass(frozen=True)
class TopicCreated:
    """What :func:`create_topic_like` asked for, and the broker's answer (0: created)."""

    error_code: int
    partitions: int
    replication: int


async def create_topic_like(
    settings: Settings, name: str, like: str, config: Mapping[str, str]
) -> TopicCreated:
    """Create topic ``name`` with the partition count and replication factor of topic ``like``
    (which must exist) and ``config``. The broker's per-topic error code is returned, not
    raised: the caller decides what "already exists" or "not allowed" means."""
    admin = AIOKafkaAdminClient(**connection_options(settings))
    await admin.start()
    try:
        (described,) = await admin.describe_topics([like])
        partitions = described["partitions"]
        replication = max(len(p["replicas"]) for p in partitions)
        response = await admin.create_topics(
            [NewTopic(name, len(partitions), replication, topic_configs=dict(config))]
        )
    finally:
        await admin.close()
    code = {topic: code for topic, code, *_ in response.topic_errors}.get(name, 0)
    return TopicCreated(int(code), len(partitions), replication)


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
    this connects once more, by hand (:func:`classify_connection`). Secrets are never part of
    the message."""
    failure = await classify_connection(settings)
    if failure is None:
        return (
            f"could not bootstrap from {settings.bootstrap_servers}, although a broker accepts a "
            "connection now (a broker restarting?); check CHUNKSTREAM_BOOTSTRAP_SERVERS"
        )
    return failure.detail


async def reachable(settings: Settings, timeout_s: float = 3.0) -> Failure | None:
    """None if some bootstrap server accepts a TCP connection now, else why none does.

    A cheap probe (no TLS, no SASL, no request) for waiting on a Kafka that is not there."""
    error: BaseException | None = None
    for host, port, _family in collect_hosts(settings.bootstrap_servers, randomize=False):
        try:
            async with asyncio.timeout(timeout_s):
                _, writer = await asyncio.open_connection(host, port)
        except (OSError, TimeoutError) as exc:
            error = exc
            continue
        writer.close()
        return None
    return _failure(settings, error)


async def classify_connection(settings: Settings, timeout_s: float = 15.0) -> Failure | None:
    """Connect by hand to each bootstrap server with the settings' TLS and SASL (the password
    file read again): None if one connects and authenticates, else what went wrong."""
    options = connection_options(settings)
    error: BaseException | None = None
    for host, port, _family in collect_hosts(settings.bootstrap_servers, randomize=False):
        try:
            conn = await create_conn(
                host,
                port,
                client_id=settings.client_id,
                request_timeout_ms=int(timeout_s * 1000),
                ssl_context=options.get("ssl_context"),
                security_protocol=settings.security_protocol,
                sasl_mechanism=options.get("sasl_mechanism", "PLAIN"),
                sasl_plain_username=settings.sasl_username,
                sasl_plain_password=options.get("sasl_plain_password"),
            )
        except (OSError, KafkaError, TimeoutError) as exc:
            error = exc
            continue
        conn.close()
        return None
    return _failure(settings, error)


def _failure(settings: Settings, error: BaseException | None) -> Failure:
    """A connection error as a :class:`Failure`: its kind and a sentence naming the settings."""
    servers = settings.bootstrap_servers
    if isinstance(error, SaslAuthenticationFailed):
        return Failure(
            Kind.AUTHENTICATION,
            f"SASL authentication failed at {servers} for user {settings.sasl_username!r} "
            f"({settings.sasl_mechanism}): check CHUNKSTREAM_SASL_USERNAME and "
            "CHUNKSTREAM_SASL_PASSWORD (or CHUNKSTREAM_SASL_PASSWORD_FILE)",
        )
    if isinstance(error, UnsupportedSaslMechanismError):
        return Failure(
            Kind.MECHANISM,
            f"the brokers at {servers} do not offer SASL mechanism {settings.sasl_mechanism}: "
            "check CHUNKSTREAM_SASL_MECHANISM",
        )
    if isinstance(error, ssl.SSLCertVerificationError):
        return Failure(
            Kind.TLS_TRUST,
            f"TLS certificate verification failed at {servers} "
            f"({getattr(error, 'verify_message', error)}): "
            "check CHUNKSTREAM_SSL_CAFILE (the CA that signed the brokers' certificates) and "
            "that CHUNKSTREAM_BOOTSTRAP_SERVERS names a host in those certificates",
        )
    if isinstance(error, ssl.SSLError):
        return Failure(
            Kind.TLS,
            f"TLS handshake failed at {servers} ({error}): check CHUNKSTREAM_SECURITY_PROTOCOL "
            "(is this a TLS listener?) and CHUNKSTREAM_SSL_CAFILE/SSL_CERTFILE/SSL_KEYFILE",
        )
    kind = _kind_of(error)
    return Failure(
        kind,
        f"cannot connect to the Kafka brokers at {servers} ({error!r}): check "
        "CHUNKSTREAM_BOOTSTRAP_SERVERS and CHUNKSTREAM_SECURITY_PROTOCOL",
    )


def _kind_of(error: BaseException | None) -> Kind:
    if isinstance(error, ConnectionRefusedError):
        return Kind.REFUSED
    if isinstance(error, OSError) and error.errno in (
        errno.EHOSTUNREACH,
        errno.ENETUNREACH,
        errno.EADDRNOTAVAIL,
    ):
        return Kind.NETWORK
    if isinstance(error, TimeoutError):
        return Kind.TIMEOUT
    if isinstance(error, socket.gaierror):
        return Kind.NAME
    if isinstance(error, ConnectionError | KafkaConnectionError):
        return Kind.CLOSED
    return Kind.OTHER


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
    nothing committed; a fetch brings a bounded amount (restores are paced by the local
    store). Fetches barely wait for data: a restore reads to an end it knows, and a request
    on the broker connection waits behind a long-polling fetch (with aiokafka's default
    ``fetch_max_wait_ms``, every offsets request of a restore waited that long)."""
    # With exactly-once, a restore reads only committed states: a state of an aborted
    # transaction (a crash, a fenced zombie) describes records no reader will ever see.
    isolation = {"isolation_level": "read_committed"} if exactly_once(settings) else {}
    return AIOKafkaConsumer(
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_bytes=8 * 1024 * 1024,
        max_partition_fetch_bytes=1024 * 1024,
        fetch_max_wait_ms=10,
        **isolation,
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
