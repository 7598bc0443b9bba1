"""The peer row: what a user would write instead of chunkstream, run on the same broker.

    .venv/bin/python bench/support/quix_peer.py --bootstrap HOST:PORT --input T --output T \\
        --documents N

A Quix Streams application (librdkafka underneath) reads JSON documents (``{"id", "text",
...}``, the worker's own DocumentEvent in JSON), splits each with LangChain's
``RecursiveCharacterTextSplitter(chunk_size=1000, add_start_index=True)`` (its other settings
as shipped, so chunks overlap by up to 200 characters) and publishes one JSON record per chunk
keyed by the document id, compressed as ``--compression`` says (librdkafka's default: none): at
least once (Quix's at-least-once guarantee: the producer is
flushed before offsets are committed), with an idempotent producer (Quix's default, stated
again here). It stops after ``--documents`` documents and prints one JSON line: the seconds and
this process's CPU seconds (every thread, librdkafka's included) from the first document
taken to the final commit, and the counts.

Bench code only: worker/ never imports it, and quixstreams and langchain-text-splitters are in
the ``bench`` extra. :func:`run_peer` runs it as a child process from the other benchmarks, so
its CPU and the worker's are never mixed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class PeerRun:
    documents: int
    chunks: int
    seconds: float
    cpu_s: float
    # The clock's span in time.monotonic() seconds (the same clock in every process).
    started: float = 0.0
    ended: float = 0.0


def run_peer(
    bootstrap: str,
    input_topic: str,
    output_topic: str,
    documents: int,
    *,
    compression: str = "none",
    cpus: str | None = None,
) -> PeerRun:
    """Run the peer in a child process on ``input_topic`` (fresh consumer group) until it has
    chunked ``documents`` documents; ``output_topic`` must exist. ``compression`` is its
    producer's ``compression.type``; ``cpus`` pins it (``taskset -c``, every thread). The
    interpreter is ``CHUNKSTREAM_PEER_PYTHON`` when set (a venv with the ``bench`` extra:
    quixstreams pins its own confluent-kafka), else this one."""
    pin = ["taskset", "-c", cpus] if cpus is not None else []
    out = subprocess.run(
        [
            *pin,
            os.environ.get("CHUNKSTREAM_PEER_PYTHON", sys.executable),
            str(Path(__file__).resolve()),
            "--bootstrap",
            bootstrap,
            "--input",
            input_topic,
            "--output",
            output_topic,
            "--documents",
            str(documents),
            "--compression",
            compression,
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return PeerRun(**result)


def main(args: argparse.Namespace) -> None:
    from langchain_text_splitters import RecursiveCharacterTextSplitter
    from quixstreams import Application

    splitter = RecursiveCharacterTextSplitter(chunk_size=1000, add_start_index=True)
    app = Application(
        broker_address=args.bootstrap,
        consumer_group=f"quix-peer-{args.output}",
        auto_offset_reset="earliest",
        processing_guarantee="at-least-once",
        producer_extra_config={"enable.idempotence": True, "compression.type": args.compression},
        loglevel="WARNING",
    )
    documents = app.topic(args.input, value_deserializer="json")
    chunks = app.topic(args.output, value_serializer="json")
    state: dict[str, Any] = {"documents": 0, "chunks": 0}

    def split(doc: dict[str, Any]) -> list[dict[str, Any]]:
        if state["documents"] == 0:
            state["started"] = (time.perf_counter(), time.process_time(), time.monotonic())
        pieces = splitter.create_documents([doc["text"]])
        state["documents"] += 1
        state["chunks"] += len(pieces)
        if state["documents"] == args.documents:
            app.stop()  # after this message: flush the producer, commit, return from run()
        return [
            {
                "doc_id": doc["id"],
                "index": index,
                "count": len(pieces),
                "text": piece.page_content,
                "start_index": piece.metadata["start_index"],
                "end_index": piece.metadata["start_index"] + len(piece.page_content),
                "metadata": doc.get("metadata", {}),
            }
            for index, piece in enumerate(pieces)
        ]

    app.dataframe(documents).apply(split, expand=True).to_topic(chunks)
    app.run()
    wall, cpu, started = state["started"]
    print(
        json.dumps(
            {
                "documents": state["documents"],
                "chunks": state["chunks"],
                "seconds": time.perf_counter() - wall,
                "cpu_s": time.process_time() - cpu,
                "started": started,
                "ended": time.monotonic(),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--documents", type=int, required=True)
    parser.add_argument(
        "--compression", default="none", help="the producer's compression.type (none, zstd, ...)"
    )
    main(parser.parse_args())
