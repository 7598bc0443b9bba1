"""`chunkstream`: run the worker, chunk files offline, produce and tail topics, emit schemas."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from worker._version import __version__
from worker.chunking.registry import StrategyError
from worker.errors import CommandError, ConfigError, InputUnreadable

if TYPE_CHECKING:
    from worker.chunking import registry
    from worker.chunking.types import Chunk, ContentType
    from worker.config import Settings
    from worker.models.reference import ModelRef

MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdx"})

# Exit statuses (README, "Exit status"). Expected failures print one line on stderr, never a
# traceback: 1 = the command could not do its job with what it was given (an unreadable input,
# no model built, a missing extra, a stopped worker); 2 = a setting, flag, parameter or
# strategy name is wrong (the message names it; argparse's own usage errors are 2 as well).
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def content_type_for(path: Path) -> ContentType:
    return "text/markdown" if path.suffix.lower() in MARKDOWN_SUFFIXES else "text/plain"


# -- run ------------------------------------------------------------------------------------


def _cmd_run(args: argparse.Namespace) -> int:
    from worker import logs
    from worker.config import load_settings
    from worker.service import Worker

    settings = load_settings(vars(args))
    logs.configure(settings.log_level)

    async def main() -> int:
        worker = Worker(settings)
        worker.install_signal_handlers()
        return await worker.run()

    return asyncio.run(main())


# -- chunk (offline) ----------------------------------------------------------------------------


def _parse_kv(items: Sequence[str] | None) -> dict[str, str]:
    from worker.config import parse_params

    params: dict[str, str] = {}
    for item in items or ():
        params.update(parse_params(item, "param"))
    return params


def read_text(path: Path) -> str:
    """A UTF-8 input file's text, or :class:`InputUnreadable` saying why not (one line)."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputUnreadable(
            f"cannot read {path}: not UTF-8 (byte {exc.start} is 0x{exc.object[exc.start]:02x})"
        ) from None
    except OSError as exc:
        raise InputUnreadable(f"cannot read {path}: {exc.strerror or exc}") from None


def _cmd_chunk(args: argparse.Namespace) -> int:
    from worker.chunking import registry
    from worker.inference import inference_settings, resolve

    strategy = registry.get(args.strategy)
    params = _parse_kv(args.param)
    strategy.parse_params(params)  # a parameter error is reported before any model check
    # A strategy may name its model (`context`'s embedding_model); --model wins.
    named = args.model or params.get("embedding_model")
    settings = inference_settings()
    # The roles resolved exactly as the worker resolves them: same models, same chunks.
    refs = resolve(settings, boundary=strategy.needs_model, retrieval=False, model_dir=named)
    context = registry.BuildContext(boundary=refs.boundary, retrieval=refs.retrieval)
    built = registry.build(args.strategy, params, context)
    # Every file is read before anything is printed: a bad one costs no partial output.
    documents = [(name, read_text(Path(name))) for name in args.files]
    return asyncio.run(_chunk_files(built, documents, settings, refs.boundary))


async def _chunk_files(
    built: registry.BuiltStrategy,
    documents: Sequence[tuple[str, str]],
    settings: Settings,
    boundary: ModelRef | None,
) -> int:
    from worker.inference import open_batcher
    from worker.pipeline import chunk_document

    out = sys.stdout
    async with contextlib.AsyncExitStack() as stack:
        embed = None
        if built.needs_model:
            # The worker's batcher, with the worker's bounds: no inference batch ever holds
            # more than max_batch_tokens, however long the document.
            batcher = await stack.enter_async_context(open_batcher(settings, model=boundary))
            embed = batcher.submit
        for name, text in documents:
            chunks = await chunk_document(built, text, content_type_for(Path(name)), embed)
            for index, chunk in enumerate(chunks):
                out.write(msgspec.json.encode(_chunk_record(name, index, chunk)).decode() + "\n")
    return 0


def _chunk_record(doc_id: str, index: int, chunk: Chunk) -> dict[str, Any]:
    record: dict[str, Any] = {
        "doc_id": doc_id,
        "index": index,
        "text": chunk.text,
        "start_index": chunk.start_index,
        "end_index": chunk.end_index,
        "token_count": chunk.token_count,
        "strategy": chunk.strategy,
        "metadata": chunk.metadata,
    }
    if chunk.spans is not None:
        record["spans"] = [[s.start, s.end] for s in chunk.spans]
    return record


# -- produce / tail / topics ------------------------------------------------------------------


def _client_settings(args: argparse.Namespace) -> Any:
    import logging

    from worker.config import load_settings

    # aiokafka retries and logs each metadata miss; our own message says it once.
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    flags = {k: v for k, v in vars(args).items() if k in ("bootstrap_servers",)}
    return load_settings(flags)


def _cmd_produce(args: argparse.Namespace) -> int:
    from worker.codec import EventEncoder
    from worker.events import DocumentEvent
    from worker.kafka import make_document_producer

    settings = _client_settings(args)
    encoder = EventEncoder(args.encoding)

    documents = []
    for name in args.files:
        path = Path(name)
        documents.append(
            DocumentEvent(
                id=f"{args.id_prefix}{name}",
                text=read_text(path),
                content_type=content_type_for(path),
                source=str(path),
            )
        )

    async def main() -> int:
        producer = make_document_producer(settings, max_request_size=args.max_request_bytes)
        await producer.start()
        sent = 0
        total_bytes = 0
        started = time.monotonic()
        try:
            acks = []
            for index, doc in enumerate(documents, start=1):
                value = encoder.encode(doc)
                acks.append(
                    await producer.send(
                        args.topic, value=value, key=doc.id.encode(), headers=encoder.headers()
                    )
                )
                sent = index
                total_bytes += len(value)
                print(
                    f"\rproduced {index}/{len(documents)} documents ({total_bytes / 1024:.1f} KiB)",
                    end="",
                    file=sys.stderr,
                )
            await asyncio.gather(*acks)
        finally:
            await producer.stop()
        elapsed = time.monotonic() - started
        print(
            f"\rproduced {sent} documents ({total_bytes / 1024:.1f} KiB) in {elapsed:.2f} s",
            file=sys.stderr,
        )
        return 0

    return asyncio.run(main())


def _cmd_delete(args: argparse.Namespace) -> int:
    """Tombstones: a null value keyed by each document id (what a CDC pipeline sends)."""
    from worker.kafka import make_document_producer

    settings = _client_settings(args)

    async def main() -> int:
        producer = make_document_producer(settings, max_request_size=1024 * 1024)
        await producer.start()
        try:
            acks = [
                await producer.send(args.topic, value=None, key=doc_id.encode())
                for doc_id in args.ids
            ]
            await asyncio.gather(*acks)
        finally:
            await producer.stop()
        print(f"deleted {len(args.ids)} documents (tombstones sent)", file=sys.stderr)
        return 0

    return asyncio.run(main())


def _describe_event(value: bytes, headers: Sequence[tuple[str, bytes]]) -> str:
    from worker.codec import decode_as
    from worker.errors import DocumentError
    from worker.events import ChunkEvent, DeadLetterEvent

    try:
        chunk = decode_as(value, headers, ChunkEvent)
        preview = chunk.text.replace("\n", "⏎ ")
        if len(preview) > 100:
            preview = preview[:97] + "..."
        return (
            f"{chunk.doc_id} #{chunk.index + 1}/{chunk.count} "
            f"[{chunk.start_index}:{chunk.end_index}] {chunk.token_count} tok "
            f"{chunk.strategy}: {preview}"
        )
    except DocumentError:
        pass
    try:
        dead = decode_as(value, headers, DeadLetterEvent)
        return (
            f"DEAD LETTER {dead.source.topic}/{dead.source.partition}@{dead.source.offset} "
            f"{dead.error_kind}: {dead.error_message}"
        )
    except DocumentError:
        return f"(undecodable record, {len(value)} bytes)"


def _cmd_tail(args: argparse.Namespace) -> int:
    from aiokafka.errors import UnknownTopicOrPartitionError

    from worker.codec import decode_as
    from worker.events import ChunkEvent
    from worker.kafka import make_reader

    settings = _client_settings(args)

    async def main() -> int:
        # No group: every partition is read from the beginning, and nothing is committed.
        consumer = make_reader(settings, args.topic)
        try:
            await consumer.start()
        except UnknownTopicOrPartitionError:
            await consumer.stop()
            print(f"chunkstream: topic {args.topic!r} not found", file=sys.stderr)
            return 1
        shown = 0
        try:
            idle_since = time.monotonic()
            while args.max is None or shown < args.max:
                batch = await consumer.getmany(timeout_ms=200)
                records = [r for rs in batch.values() for r in rs]
                if not records:
                    if args.idle_timeout and time.monotonic() - idle_since > args.idle_timeout:
                        break
                    continue
                idle_since = time.monotonic()
                for record in records:
                    headers = list(record.headers)
                    if record.value is None:  # a tombstone: the key is what is deleted
                        key = (record.key or b"").decode(errors="replace")
                        owner = dict(headers).get("chunkstream-doc-id") or b"?"
                        print(f"TOMBSTONE {key} of {owner.decode(errors='replace')}", flush=True)
                        shown += 1
                        continue
                    value = record.value
                    if args.json:
                        event = decode_as(value, headers, ChunkEvent)
                        print(msgspec.json.encode(event).decode(), flush=True)
                    else:
                        print(_describe_event(value, headers), flush=True)
                    shown += 1
        finally:
            await consumer.stop()
        return 0

    return asyncio.run(main())


def _cmd_sink(args: argparse.Namespace) -> int:
    from worker.kafka import make_sink_consumer
    from worker.sink import SinkStore, run_sink

    settings = _client_settings(args)
    store = SinkStore(Path(args.db))

    async def main() -> int:
        consumer = make_sink_consumer(settings, args.topic, args.group)
        await consumer.start()
        try:
            applied = await run_sink(consumer, store, idle_timeout_s=args.idle_timeout)
        finally:
            await consumer.stop()
        print(f"applied {applied} records to {args.db}", file=sys.stderr)
        return 0

    try:
        code = asyncio.run(main())
        if args.show:
            for row in store.rows():
                text = (row.text or "").replace("\n", "⏎ ")
                text = text if len(text) <= 80 else text[:77] + "..."
                print(f"{row.doc_id} #{row.index} {row.key}: {text}")
        return code
    finally:
        store.close()


def _cmd_topics(args: argparse.Namespace) -> int:
    from worker.config import load_settings
    from worker.kafka import create_topics, worker_topics

    settings = load_settings({k: v for k, v in vars(args).items() if v is not None})
    topics, configs = worker_topics(settings, args.partitions)
    asyncio.run(
        create_topics(settings, topics, max_message_bytes=args.max_message_bytes, configs=configs)
    )
    print("topics ready: " + ", ".join(f"{t} ({p})" for t, p in topics.items()))
    return 0


async def group_lag(settings: Any, group: str, topic: str) -> dict[int, tuple[int, int]]:
    """partition → (committed offset, end offset) of ``group`` on ``topic``."""
    from aiokafka import TopicPartition
    from aiokafka.errors import CoordinatorLoadInProgressError, GroupCoordinatorNotAvailableError

    from worker.kafka import make_admin, make_reader

    consumer = make_reader(settings, topic)
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        end = await consumer.end_offsets(partitions)
    finally:
        await consumer.stop()
    admin = make_admin(settings)
    await admin.start()
    try:
        try:
            committed = await admin.list_consumer_group_offsets(group)
        except (GroupCoordinatorNotAvailableError, CoordinatorLoadInProgressError):
            committed = {}
    finally:
        await admin.close()
    return {
        tp.partition: (committed[tp].offset if tp in committed else 0, end[tp])
        for tp in sorted(partitions, key=lambda tp: tp.partition)
    }


def _cmd_lag(args: argparse.Namespace) -> int:
    settings = _client_settings(args)

    async def main() -> int:
        deadline = time.monotonic() + (args.wait or 0)
        while True:
            lag = await group_lag(settings, args.group, args.topic)
            behind = sum(max(0, end - done) for done, end in lag.values())
            if behind == 0 or time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.5)
        for partition, (done, end) in lag.items():
            print(f"{args.topic}[{partition}] committed={done} end={end} lag={max(0, end - done)}")
        return 0 if behind == 0 or not args.wait else 1

    return asyncio.run(main())


# -- schema ----------------------------------------------------------------------------------


def _cmd_schema(args: argparse.Namespace) -> int:
    from worker import schema

    out = Path(args.out)
    if args.check:
        stale = schema.drift(out)
        if stale:
            print(
                f"schemas out of date: {', '.join(stale)}; run `chunkstream schema`",
                file=sys.stderr,
            )
            return 1
        print("schemas up to date")
        return 0
    for path in schema.write(out):
        print(path)
    return 0


def _cmd_settings(args: argparse.Namespace) -> int:
    from worker.config import settings_table

    print(settings_table())
    return 0


# -- parser --------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    from worker.config import add_flags

    parser = argparse.ArgumentParser(prog="chunkstream", description=__doc__)
    parser.add_argument("--version", action="version", version=f"chunkstream {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run the Kafka worker (settings: env CHUNKSTREAM_* or flags)")
    add_flags(run)
    run.set_defaults(func=_cmd_run)

    chunk = sub.add_parser("chunk", help="chunk files offline; one JSON object per chunk")
    chunk.add_argument("--strategy", default="sentence")
    chunk.add_argument("--param", action="append", metavar="K=V", help="strategy parameter")
    chunk.add_argument("--model", default=None, help="model directory (embedding strategies)")
    chunk.add_argument("files", nargs="+")
    chunk.set_defaults(func=_cmd_chunk)

    produce = sub.add_parser("produce", help="send files as DocumentEvents")
    produce.add_argument("--bootstrap-servers", required=True)
    produce.add_argument("--topic", default="documents")
    produce.add_argument("--encoding", choices=["msgpack", "json"], default="msgpack")
    produce.add_argument("--id-prefix", default="", help="prepended to each file path → doc id")
    produce.add_argument("--max-request-bytes", type=int, default=16 * 1024 * 1024)
    produce.add_argument("files", nargs="+")
    produce.set_defaults(func=_cmd_produce)

    delete = sub.add_parser("delete", help="delete documents: send tombstones keyed by their ids")
    delete.add_argument("--bootstrap-servers", required=True)
    delete.add_argument("--topic", default="documents")
    delete.add_argument("ids", nargs="+", metavar="ID", help="document ids")
    delete.set_defaults(func=_cmd_delete)

    tail = sub.add_parser("tail", help="print chunk events (or dead letters) readably")
    tail.add_argument("--bootstrap-servers", required=True)
    tail.add_argument("--topic", default="chunks")
    tail.add_argument("--max", type=int, default=None, help="stop after N events")
    tail.add_argument("--idle-timeout", type=float, default=None, help="stop after S idle seconds")
    tail.add_argument("--json", action="store_true", help="one JSON chunk event per line")
    tail.set_defaults(func=_cmd_tail)

    sink = sub.add_parser(
        "sink",
        help="the reference sink: apply a topic to SQLite (upsert by key, delete on null)",
    )
    sink.add_argument("--bootstrap-servers", required=True)
    sink.add_argument("--topic", default="chunks")
    sink.add_argument("--db", required=True, help="SQLite file (created if missing)")
    sink.add_argument("--group", default="chunkstream-sink", help="consumer group")
    sink.add_argument("--idle-timeout", type=float, default=None, help="stop after S idle seconds")
    sink.add_argument("--show", action="store_true", help="print every row afterwards")
    sink.set_defaults(func=_cmd_sink)

    lag = sub.add_parser("lag", help="committed vs end offsets of a consumer group")
    lag.add_argument("--bootstrap-servers", required=True)
    lag.add_argument("--group", default="chunkstream")
    lag.add_argument("--topic", default="documents")
    lag.add_argument("--wait", type=float, default=None, help="wait up to S seconds for lag 0")
    lag.set_defaults(func=_cmd_lag)

    topics = sub.add_parser("topics", help="create the input, output and dead-letter topics")
    topics.add_argument("--bootstrap-servers", default=None)
    topics.add_argument("--input-topic", default=None)
    topics.add_argument("--output-topic", default=None)
    topics.add_argument("--dlq-topic", default=None)
    topics.add_argument("--group-id", default=None, help="names the default state topic")
    topics.add_argument("--state-topic", default=None)
    topics.add_argument("--documents-topic", default=None)
    topics.add_argument("--partitions", type=int, default=3)
    topics.add_argument("--max-message-bytes", type=int, default=16 * 1024 * 1024)
    topics.set_defaults(func=_cmd_topics)

    schema = sub.add_parser("schema", help="write JSON Schemas and the AsyncAPI document")
    schema.add_argument("--out", default="schemas")
    schema.add_argument("--check", action="store_true", help="fail if the files are stale")
    schema.set_defaults(func=_cmd_schema)

    settings = sub.add_parser("settings", help="print the table of every setting")
    settings.set_defaults(func=_cmd_settings)

    _add_embedding_commands(sub)
    return parser


def _add_embedding_commands(sub: Any) -> None:
    try:
        from worker.model_making import commands
    except ImportError:  # pragma: no cover - the embedding package is always shipped
        return
    commands.add_model_command(sub)
    commands.add_embed_command(sub)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except (ConfigError, StrategyError) as exc:
        print(f"chunkstream: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except CommandError as exc:
        print(f"chunkstream: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return code


if __name__ == "__main__":
    sys.exit(main())
