"""The library's default (``worker.build``, the README's example) cuts as ``chunkstream chunk``
and the worker do: the same model resolution, so the same sizes, chunks and fingerprint.

Before, ``worker.build("sentence")`` resolved no model and sized up to 1,000 characters while
the worker and the CLI sized to the retrieval model's tokens: every document cut differently
(issue 46, item 8). tests/broker/test_library_parity.py holds the library to the worker's
chunk ids on the real broker."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import worker
from tests.support import kafka_io
from tests.support.corpus import gather
from worker.chunking import registry
from worker.chunking.types import ContentType

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").iterdir())


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The examples and the descriptions of the dependency closure, as files."""
    folder = tmp_path_factory.mktemp("docs")
    paths = list(EXAMPLES)
    for doc in gather():
        suffix = ".md" if doc.content_type == "text/markdown" else ".txt"
        path = folder / f"{doc.name}{suffix}"
        path.write_text(doc.text, encoding="utf-8")
        paths.append(path)
    return paths


@pytest.mark.timeout(600)
@pytest.mark.parametrize("strategy", ["sentence", "adaptive", "lexical"])
def test_the_library_default_cuts_as_the_cli_and_the_worker(
    strategy: str, documents: list[Path]
) -> None:
    built = worker.build(strategy)
    as_worker = kafka_io.build_as_worker(
        kafka_io.make_settings("unused:9092", {}, strategy=strategy)
    )
    assert built.fingerprint == as_worker.fingerprint  # the same ids
    assert built.fingerprint != registry.build(strategy).fingerprint  # sized by the model
    result = subprocess.run(
        [sys.executable, "-m", "worker.cli", "chunk", "--strategy", strategy, *map(str, documents)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=540,
        check=True,
    )
    from_cli: dict[str, list[tuple[object, ...]]] = {str(p): [] for p in documents}
    for line in result.stdout.splitlines():
        row = json.loads(line)
        from_cli[row["doc_id"]].append(
            (row["text"], row["start_index"], row["token_count"], row["metadata"])
        )
    differing = []
    for path in documents:
        kind: ContentType = "text/markdown" if path.suffix == ".md" else "text/plain"
        chunks = worker.chunk_document_sync(built, path.read_text(encoding="utf-8"), kind, None)
        mine = [(c.text, c.start_index, c.token_count, c.metadata) for c in chunks]
        if mine != from_cli[str(path)]:
            differing.append(path.name)
    assert len(documents) > 30
    assert differing == []


def test_the_default_model_references_are_the_workers() -> None:
    context = worker.build_context("semantic")
    settings = kafka_io.make_settings("unused:9092", {}, strategy="semantic")
    from worker.inference.serving import resolve

    refs = resolve(settings, boundary=True, retrieval=False)
    assert context.boundary == refs.boundary
    assert context.retrieval == refs.retrieval
    assert context.retrieval is not None
    assert context.retrieval.window == 254
    assert worker.build_context("sentence").boundary is None  # no model places its cuts
    # Explicitly none: the model-free sizes in characters, as the registry's own build.
    bare = worker.build("sentence", context=registry.BuildContext())
    assert bare.fingerprint == registry.build("sentence").fingerprint
