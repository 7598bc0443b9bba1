"""The Kafka commands: ``run`` (the worker) and the operator tools ``produce``, ``tail`` (how it
decodes and prints records: :mod:`worker.cli.tail`), ``lag`` and ``topics`` (``delete`` and
``sink`` are :mod:`worker.cli.lifecycle_tools`).

Every tool connects the same way (:func:`add_connection_flags`, :func:`client_settings`,
:func:`started`), so a broker that cannot be reached, or refuses the client (TLS, SASL), is one
``chunkstream:`` line naming the settings to check and exit status 69
(:class:`~worker.cli.status.KafkaUnreachable`), with every client stopped: no traceback, no
"Unclosed AIOKafka…" warning. A topic the cluster does not have is one line and exit status 1
(:func:`topic_partitions`, :class:`~worker.cli.status.TopicNotFound`), asked before any client
is pointed at the topic: aiokafka waits for a missing topic's metadata for its whole request
timeout (``request_timeout_ms``) and then raises. A new tool registers its parser in
:func:`add_commands`, checks its topics with :func:`require_topic` and opens its clients with
``async with started(client, settings)``.

``run`` keeps the worker's own start-up behaviour (worker/app.py decides what a missing
broker means for the worker).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from aiokafka.errors import KafkaConnectionError

from worker.cli.inputs import CONTENT_TYPES, STDIN, check_openable, read_document
from worker.cli.status import KafkaUnreachable, TopicNotFound

if TYPE_CHECKING:
    from aiokafka.admin import AIOKafkaAdminClient

    from worker.config import Settings

SubParsers = argparse._SubParsersAction


class KafkaClient(Protocol):
    """What :func:`started` needs of a client: ``start``, and ``stop`` (consumers, producers)
    or ``close`` (the admin client)."""

    async def start(self) -> None: ...


Client = TypeVar("Client", bound=KafkaClient)


def add_commands(sub: SubParsers[argparse.ArgumentParser]) -> None:
    from worker.config import add_flags

    run = sub.add_parser("run", help="run the Kafka worker (settings: env CHUNKSTREAM_* or flags)")
    add_flags(run)
    run.set_defaults(func=run_worker)
    add_produce(sub)
    add_tail(sub)
    add_lag(sub)
    add_topics(sub)


def add_connection_flags(parser: argparse.ArgumentParser) -> None:
    """The broker to talk to; security settings come from the environment, as for ``run``."""
    parser.add_argument(
        "--bootstrap-servers",
        default=None,
        help="host:port[,host:port…] (default: CHUNKSTREAM_BOOTSTRAP_SERVERS, else localhost:9092;"
        " TLS and SASL: the CHUNKSTREAM_* settings of `chunkstream settings`)",
    )


def client_settings(args: argparse.Namespace, **flags: Any) -> Settings:
    """The settings of a tool: environment, then ``--bootstrap-servers`` and ``flags``."""
    from worker.config import load_settings

    # aiokafka logs every failed connection attempt; our one line says it once.
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    given = {"bootstrap_servers": args.bootstrap_servers, **flags}
    return load_settings({k: v for k, v in given.items() if v is not None})


@contextlib.asynccontextmanager
async def started(client: Client, settings: Settings) -> AsyncIterator[Client]:
    """``client`` started, and stopped on the way out whatever happens. A bootstrap failure
    becomes :class:`KafkaUnreachable` carrying the diagnosis (which setting to check)."""
    from worker.kafka.clients import diagnose_connection

    stop = _stop_method(client)
    try:
        await client.start()
    except BaseException as exc:
        with contextlib.suppress(Exception):
            await stop()
        if isinstance(exc, KafkaConnectionError):
            raise KafkaUnreachable(await diagnose_connection(settings)) from None
        raise
    try:
        yield client
    finally:
        await stop()


async def topic_partitions(admin: AIOKafkaAdminClient, settings: Settings, topic: str) -> list[int]:
    """The partitions of ``topic``, from one metadata request for every topic (asking for the
    topic by name would let brokers with ``auto.create.topics.enable`` create it), or
    :class:`TopicNotFound`."""
    for described in await admin.describe_topics():
        if described["topic"] == topic:
            return sorted(p["partition"] for p in described["partitions"])
    raise TopicNotFound(
        f"topic {topic!r} not found on {settings.bootstrap_servers} (or not visible to this "
        "client): check --topic, or create it with `chunkstream topics`"
    )


async def require_topic(settings: Settings, topic: str) -> list[int]:
    """:func:`topic_partitions` on an admin client of its own, for a tool that has none."""
    from worker.kafka.clients import make_admin

    async with started(make_admin(settings), settings) as admin:
        return await topic_partitions(admin, settings, topic)


def _stop_method(client: KafkaClient) -> Callable[[], Awaitable[None]]:
    for name in ("stop", "close"):  # consumers and producers stop; the admin client closes
        method: Callable[[], Awaitable[None]] | None = getattr(client, name, None)
        if method is not None:
            return method
    raise TypeError(f"{type(client).__name__} has neither stop() nor close()")


# -- run --------------------------------------------------------------------------------------


def run_worker(args: argparse.Namespace) -> int:
    # A stop requested while the worker's modules load (a pod deleted as it starts) is kept
    # and honoured once the worker's own handlers are in place: exit 0, nothing consumed.
    stop_requested: list[int] = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda received, _: stop_requested.append(received))

    from worker.app import Worker
    from worker.config import load_settings, unknown_variables
    from worker.observability import logs

    settings = load_settings(vars(args))
    logs.configure(settings.log_level)
    for warning in unknown_variables(os.environ):
        logging.getLogger("worker.config").warning(warning)

    async def main() -> int:
        worker = Worker(settings)
        worker.install_signal_handlers()
        if stop_requested:
            logging.getLogger("worker.app").info(
                "signal received while starting: stopping", extra={"signal": stop_requested[0]}
            )
            worker.request_stop()
        return await worker.run()

    return asyncio.run(main())


# -- produce ----------------------------------------------------------------------------------


def add_produce(sub: SubParsers[argparse.ArgumentParser]) -> None:
    produce = sub.add_parser(
        "produce",
        help="send files as DocumentEvents",
        description="Send each file (or stdin) as one DocumentEvent whose text is the file's "
        "own text: UTF-8, line ends kept (CRLF stays CRLF), a byte-order mark dropped. Every "
        "file is read and checked before the first is sent.",
    )
    add_connection_flags(produce)
    produce.add_argument(
        "--topic", default=None, help="default: CHUNKSTREAM_INPUT_TOPIC, else documents"
    )
    produce.add_argument("--encoding", choices=["msgpack", "json"], default="msgpack")
    produce.add_argument("--id-prefix", default="", help="prepended to each file path → doc id")
    produce.add_argument(
        "--content-type",
        choices=CONTENT_TYPES,
        default=None,
        help="of every document (default: text/markdown for .md, .markdown, .mdx, else text/plain)",
    )
    produce.add_argument("--max-request-bytes", type=int, default=16 * 1024 * 1024)
    produce.add_argument("files", nargs="+", metavar="FILE", help=f"a UTF-8 file; {STDIN} is stdin")
    produce.set_defaults(func=run_produce)


def run_produce(args: argparse.Namespace) -> int:
    from worker.kafka.clients import make_document_producer
    from worker.wire.codec import EventEncoder
    from worker.wire.events import DocumentEvent

    settings = client_settings(args)
    topic = args.topic or settings.input_topic
    encoder = EventEncoder(args.encoding)
    check_openable(args.files)
    # Sent records cannot be taken back: every file is decoded once before anything is sent
    # (stdin, which cannot be read twice, is kept), then each is read again as it is sent.
    kept = {name: read_document(name, args.content_type) for name in args.files if name == STDIN}
    for name in args.files:
        if name != STDIN:
            read_document(name, args.content_type)

    async def main() -> int:
        await require_topic(settings, topic)
        producer = make_document_producer(settings, max_request_size=args.max_request_bytes)
        sent = total_bytes = 0
        began = time.monotonic()
        async with started(producer, settings):
            acks = []
            for name in args.files:
                document = kept.pop(name, None) or read_document(name, args.content_type)
                event = DocumentEvent(
                    id=f"{args.id_prefix}{name}",
                    text=document.text,
                    content_type=document.content_type,
                    source=name,
                )
                value = encoder.encode(event)
                acks.append(
                    await producer.send(
                        topic, value=value, key=event.id.encode(), headers=encoder.headers()
                    )
                )
                sent += 1
                total_bytes += len(value)
                if sys.stderr.isatty():
                    print(
                        f"\rproduced {sent}/{len(args.files)} documents "
                        f"({total_bytes / 1024:.1f} KiB)",
                        end="",
                        file=sys.stderr,
                    )
            await asyncio.gather(*acks)
        elapsed = time.monotonic() - began
        print(
            f"\rproduced {sent} documents ({total_bytes / 1024:.1f} KiB) in {elapsed:.2f} s",
            file=sys.stderr,
        )
        return 0

    return asyncio.run(main())


# -- tail -------------------------------------------------------------------------------------


def add_tail(sub: SubParsers[argparse.ArgumentParser]) -> None:
    tail = sub.add_parser(
        "tail",
        help="print a topic's records readably, decoded as what the topic carries",
        description="Print every record of a topic from the beginning, one line each: chunk "
        "events, dead letters, documents, documents-topic events or state records, as the "
        "topic's role in the settings says (a topic the settings do not name: by each "
        "record's shape); tombstones as such.",
    )
    add_connection_flags(tail)
    tail.add_argument(
        "--topic", default=None, help="default: CHUNKSTREAM_OUTPUT_TOPIC, else chunks"
    )
    tail.add_argument("--max", type=_count, default=None, help="stop after N records")
    tail.add_argument(
        "--idle-timeout",
        type=float,
        default=None,
        help="stop after S seconds without a new record (0: at the first empty fetch)",
    )
    tail.add_argument("--json", action="store_true", help="one JSON object per record")
    tail.set_defaults(func=run_tail)


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count of records (at least 1)")
    return value


def run_tail(args: argparse.Namespace) -> int:
    from aiokafka import TopicPartition

    # The event types and codecs only when tailing.
    from worker.cli.tail import Record, carried_by, line_of, print_records
    from worker.kafka.clients import make_reader

    settings = client_settings(args)
    topic = args.topic or settings.output_topic
    carried = carried_by(topic, settings)

    def show(record: Record) -> str:
        return line_of(record, carried, args.json)

    async def main() -> int:
        partitions = await require_topic(settings, topic)
        # No group: every partition from the beginning, nothing committed.
        async with started(make_reader(settings), settings) as consumer:
            consumer.assign([TopicPartition(topic, p) for p in partitions])
            await print_records(consumer, show, limit=args.max, idle_timeout_s=args.idle_timeout)
        return 0

    return asyncio.run(main())


# -- lag ----------------------------------------------------------------------------------------


def add_lag(sub: SubParsers[argparse.ArgumentParser]) -> None:
    lag = sub.add_parser("lag", help="committed vs end offsets of a consumer group")
    add_connection_flags(lag)
    lag.add_argument(
        "--group", default=None, help="default: CHUNKSTREAM_GROUP_ID, else chunkstream"
    )
    lag.add_argument(
        "--topic", default=None, help="default: CHUNKSTREAM_INPUT_TOPIC, else documents"
    )
    lag.add_argument("--wait", type=float, default=None, help="wait up to S seconds for lag 0")
    lag.set_defaults(func=run_lag)


async def group_lag(settings: Settings, group: str, topic: str) -> dict[int, tuple[int, int]]:
    """partition → (committed offset, end offset) of ``group`` on ``topic``."""
    from aiokafka import TopicPartition
    from aiokafka.errors import CoordinatorLoadInProgressError, GroupCoordinatorNotAvailableError

    from worker.kafka.clients import make_admin, make_reader

    async with started(make_admin(settings), settings) as admin:
        partitions = [
            TopicPartition(topic, p) for p in await topic_partitions(admin, settings, topic)
        ]
        try:
            committed = await admin.list_consumer_group_offsets(group)
        except (GroupCoordinatorNotAvailableError, CoordinatorLoadInProgressError):
            committed = {}
    async with started(make_reader(settings), settings) as consumer:
        end = await consumer.end_offsets(partitions)
    return {
        tp.partition: (committed[tp].offset if tp in committed else 0, end[tp]) for tp in partitions
    }


def run_lag(args: argparse.Namespace) -> int:
    settings = client_settings(args)
    group = args.group or settings.group_id
    topic = args.topic or settings.input_topic

    async def main() -> int:
        deadline = time.monotonic() + (args.wait or 0)
        while True:
            lag = await group_lag(settings, group, topic)
            behind = sum(max(0, end - done) for done, end in lag.values())
            if behind == 0 or time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.5)
        for partition, (done, end) in lag.items():
            print(f"{topic}[{partition}] committed={done} end={end} lag={max(0, end - done)}")
        return 0 if behind == 0 or not args.wait else 1

    return asyncio.run(main())


# -- topics -------------------------------------------------------------------------------------


def add_topics(sub: SubParsers[argparse.ArgumentParser]) -> None:
    topics = sub.add_parser(
        "topics",
        help="create the worker's topics: input, output, dead letters, the state changelog",
    )
    add_connection_flags(topics)
    topics.add_argument("--input-topic", default=None)
    topics.add_argument("--output-topic", default=None)
    topics.add_argument("--dlq-topic", default=None)
    topics.add_argument(
        "--group-id", default=None, help="the worker's group: names the default state topic"
    )
    topics.add_argument("--state-topic", default=None)
    topics.add_argument("--documents-topic", default=None)
    topics.add_argument("--partitions", type=int, default=3)
    topics.add_argument("--max-message-bytes", type=int, default=16 * 1024 * 1024)
    topics.set_defaults(func=run_topics)


def run_topics(args: argparse.Namespace) -> int:
    from worker.kafka.clients import create_topics, diagnose_connection, worker_topics

    settings = client_settings(
        args,
        input_topic=args.input_topic,
        output_topic=args.output_topic,
        dlq_topic=args.dlq_topic,
        group_id=args.group_id,
        state_topic=args.state_topic,
        documents_topic=args.documents_topic,
    )
    topics, configs = worker_topics(settings, args.partitions)

    async def main() -> None:
        # create_topics closes its admin client itself (a failed start leaves nothing open).
        try:
            await create_topics(
                settings, topics, max_message_bytes=args.max_message_bytes, configs=configs
            )
        except KafkaConnectionError:
            raise KafkaUnreachable(await diagnose_connection(settings)) from None

    asyncio.run(main())
    print("topics ready: " + ", ".join(f"{t} ({p})" for t, p in topics.items()))
    return 0
