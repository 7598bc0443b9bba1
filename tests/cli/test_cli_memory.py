"""`chunkstream chunk` with an embedding strategy on a large document: memory stays bounded.

The CLI embeds through the worker's batcher with the worker's ``max_batch_tokens``, so no
inference batch holds a whole document. Before that, the CLI handed every text of a document
to the model at once and a 176 KB document peaked at 10 GB. Each run is measured in its own
parent process (``RUSAGE_CHILDREN`` is the peak of the children a process has waited for), so
no other test's subprocess counts.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.long_document import long_markdown

pytestmark = pytest.mark.model
REPO = Path(__file__).resolve().parents[2]
PEAK_RSS_BOUND = 1536 * 1024 * 1024  # bytes; the acceptance bound

MEASURE = """
import json, resource, subprocess, sys
run = subprocess.run(sys.argv[1:], capture_output=True, text=True)
peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # Linux: KiB
print(json.dumps({"code": run.returncode, "stdout": run.stdout, "stderr": run.stderr,
                  "peak": peak_kib * 1024}))
"""


@pytest.mark.parametrize("strategy", ["semantic", "sdpm", "context"])
def test_chunk_command_memory_is_bounded_on_a_large_document(
    model_dir: Path, tmp_path: Path, strategy: str
) -> None:
    text = long_markdown(220_000)
    document = tmp_path / "large.md"
    document.write_text(text, encoding="utf-8")
    command = [sys.executable, "-m", "worker.cli", "chunk", "--strategy", strategy]
    measured = subprocess.run(
        [sys.executable, "-c", MEASURE, *command, "--model", str(model_dir), str(document)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=280,
        check=True,
    )
    result = json.loads(measured.stdout)
    assert result["code"] == 0, result["stderr"]
    rows = [json.loads(line) for line in result["stdout"].splitlines()]
    assert len(rows) > 20  # the whole document was chunked
    assert rows[-1]["end_index"] >= len(text.rstrip()) - 1
    assert result["peak"] < PEAK_RSS_BOUND, f"peak RSS {result['peak'] / 2**20:.0f} MiB"
