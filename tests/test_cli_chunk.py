"""`chunkstream chunk`: offline chunking of files, one JSON object per chunk."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((REPO / "examples").iterdir())
KEYS = {
    "doc_id",
    "index",
    "text",
    "start_index",
    "end_index",
    "token_count",
    "strategy",
    "metadata",
}


def chunk(strategy: str, *args: str) -> list[dict[str, object]]:
    result = subprocess.run(
        [sys.executable, "-m", "worker.cli", "chunk", "--strategy", strategy, *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=True,
    )
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.mark.parametrize("strategy", ["sentence", "adaptive", "lexical"])
def test_chunk_command_output_shape_offsets_and_determinism(strategy: str) -> None:
    files = [str(p) for p in EXAMPLES]
    first = chunk(strategy, *files)
    assert first == chunk(strategy, *files), "same input, same output"
    assert {row["doc_id"] for row in first} == set(files)
    for row in first:
        assert set(row) >= KEYS
        assert row["strategy"] == strategy
        text = Path(str(row["doc_id"])).read_text(encoding="utf-8")
        start, end = int(row["start_index"]), int(row["end_index"])  # type: ignore[call-overload]
        assert row["text"] == text[start:end]
    for name in files:
        indexes = [row["index"] for row in first if row["doc_id"] == name]
        assert indexes == list(range(len(indexes)))


def test_chunk_command_params_and_errors() -> None:
    rows = chunk("sentence", "--param", "chunk_size=40", str(EXAMPLES[0]))
    assert all(len(str(row["text"])) <= 40 for row in rows)
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "worker.cli",
            "chunk",
            "--strategy",
            "sentence",
            "--param",
            "chunk_size=zero",
            str(EXAMPLES[0]),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert bad.returncode == 2
    assert "chunk_size" in bad.stderr
    assert "Traceback" not in bad.stderr
