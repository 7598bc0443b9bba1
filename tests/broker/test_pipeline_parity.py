"""`chunkstream chunk` and the worker give the same chunks for the same document.

Both run :func:`worker.pipeline.chunk_document` over a batcher built by
:func:`worker.inference.serving.open_batcher` from the same settings; this checks it end to
end: the CLI in a subprocess, the worker against the real broker and the real model.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tests.support import kafka_io
from tests.support.long_document import long_markdown
from worker.wire.events import DocumentEvent

pytestmark = [pytest.mark.kafka, pytest.mark.model]
REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / ".cache" / "models" / "all-MiniLM-L6-v2"
CHUNK = [sys.executable, "-m", "worker.cli", "chunk"]


@pytest.fixture(scope="module")
def model_dir() -> Path:
    from worker.model_making.build import ensure_model
    from worker.model_making.source import default_source_dir

    ensure_model(default_source_dir(), MODEL, int8=True)
    return MODEL


def comparable(row: dict[str, Any]) -> tuple[object, ...]:
    spans = row.get("spans")
    return (
        row["index"],
        row["text"],
        row["start_index"],
        row["end_index"],
        row["token_count"],
        row["strategy"],
        json.dumps(row["metadata"], sort_keys=True),
        None if spans is None else [(s["start"], s["end"]) for s in spans],
    )


# The embedding strategies: plan → batcher → assemble; lexical: the rule path, on a thread
# (the document is over 64 KB). ``named``: both are given the transformer's directory; else
# neither has any model setting and the CLI runs outside the checkout: both must find the
# same default models (the distilled static boundary model) and cut alike.
@pytest.mark.parametrize(
    ("strategy", "named"),
    [
        ("semantic", True),
        ("sdpm", True),
        ("context", True),
        ("lexical", True),
        ("semantic", False),
        ("context", False),
    ],
)
async def test_cli_and_worker_produce_the_same_chunks(
    kafka_bootstrap: str,
    topic_names: dict[str, str],
    model_dir: Path,
    tmp_path: Path,
    strategy: str,
    named: bool,
) -> None:
    text = long_markdown(120_000, seed=5)
    path = tmp_path / "doc.md"
    path.write_text(text, encoding="utf-8")
    model_flag = ["--model", str(model_dir)] if named else []
    cli = await asyncio.to_thread(
        subprocess.run,
        [*CHUNK, "--strategy", strategy, *model_flag, str(path)],
        capture_output=True,
        text=True,
        cwd=REPO if named else tmp_path,
        timeout=240,
        check=True,
    )
    from_cli = [comparable(json.loads(line)) for line in cli.stdout.splitlines()]

    model_setting = {"model_dir": str(model_dir)} if named else {}
    settings = kafka_io.make_settings(
        kafka_bootstrap, topic_names, strategy=strategy, **model_setting
    )
    await kafka_io.create(settings, partitions=1)
    doc = DocumentEvent(id="doc", text=text, content_type="text/markdown")
    await kafka_io.produce_raw(
        kafka_bootstrap, settings.input_topic, kafka_io.encode_documents([doc])
    )
    await kafka_io.run_worker_to_end(settings, timeout_s=200)
    events = await kafka_io.chunk_events(kafka_bootstrap, settings.output_topic)
    from_worker = [
        comparable(
            {
                "index": e.index,
                "text": e.text,
                "start_index": e.start_index,
                "end_index": e.end_index,
                "token_count": e.token_count,
                "strategy": e.strategy,
                "metadata": e.metadata,
                "spans": None if e.spans is None else msgspec.to_builtins(e.spans),
            }
        )
        for e in sorted(events, key=lambda e: e.index)
    ]
    assert len(from_cli) > 20
    assert from_worker == from_cli
