"""The document-lifecycle commands (docs/concepts/lifecycle.md): ``delete`` sends tombstones,
``sink`` is the reference sink — what a stock Kafka sink does with the chunk topic, into SQLite."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from worker.cli.kafka_tools import (
    SubParsers,
    add_connection_flags,
    client_settings,
    require_topic,
    started,
)


def add_commands(sub: SubParsers[argparse.ArgumentParser]) -> None:
    delete = sub.add_parser("delete", help="delete documents: send tombstones keyed by their ids")
    add_connection_flags(delete)
    delete.add_argument(
        "--topic", default=None, help="default: CHUNKSTREAM_INPUT_TOPIC, else documents"
    )
    delete.add_argument("ids", nargs="+", metavar="ID", help="document ids")
    delete.set_defaults(func=run_delete)

    sink = sub.add_parser(
        "sink",
        help="the reference sink: apply a topic to SQLite (upsert by key, delete on null)",
        description="Consume a topic in a consumer group and apply it to a SQLite file as stock "
        "Kafka sinks do: a record upserts its value under its key, a null value deletes the "
        "key; offsets are committed after the rows are written.",
    )
    add_connection_flags(sink)
    sink.add_argument(
        "--topic", default=None, help="default: CHUNKSTREAM_OUTPUT_TOPIC, else chunks"
    )
    sink.add_argument("--db", required=True, help="SQLite file (created if missing)")
    sink.add_argument("--group", default="chunkstream-sink", help="consumer group")
    sink.add_argument("--idle-timeout", type=float, default=None, help="stop after S idle seconds")
    sink.add_argument("--show", action="store_true", help="print every row afterwards")
    sink.set_defaults(func=run_sink_command)


def run_delete(args: argparse.Namespace) -> int:
    """Tombstones: a null value keyed by each document id (what a CDC pipeline sends)."""
    from worker.kafka.clients import make_document_producer

    settings = client_settings(args)
    topic = args.topic or settings.input_topic

    async def main() -> int:
        await require_topic(settings, topic)
        producer = make_document_producer(settings, max_request_size=1024 * 1024)
        async with started(producer, settings):
            acks = [
                await producer.send(topic, value=None, key=doc_id.encode()) for doc_id in args.ids
            ]
            await asyncio.gather(*acks)
        print(f"deleted {len(args.ids)} documents (tombstones sent)", file=sys.stderr)
        return 0

    return asyncio.run(main())


def run_sink_command(args: argparse.Namespace) -> int:
    from worker.cli.sink import SinkStore, run_sink
    from worker.kafka.clients import make_sink_consumer

    settings = client_settings(args)
    topic = args.topic or settings.output_topic

    async def main() -> int:
        await require_topic(settings, topic)  # before the database file is made
        store = SinkStore(Path(args.db))
        try:
            consumer = make_sink_consumer(settings, topic, args.group)
            async with started(consumer, settings):
                applied = await run_sink(consumer, store, idle_timeout_s=args.idle_timeout)
            print(f"applied {applied} records to {args.db}", file=sys.stderr)
            if args.show:
                for row in store.rows():
                    text = (row.text or "").replace("\n", "⏎ ")
                    text = text if len(text) <= 80 else text[:77] + "..."
                    print(f"{row.doc_id} #{row.index} {row.key}: {text}")
        finally:
            store.close()
        return 0

    return asyncio.run(main())
