"""`scripts/demo --from-table`, run as a user runs it (README): a PostgreSQL table through
Debezium's PostgreSQL source, the worker and the JDBC sink; after the snapshot, an insert, a
text update, a title-only update and a delete it shows the chunk table beside chunking the
rows directly (the demo itself fails when they differ), and it ends with the nearest chunks to
a question. What it prints is checked against examples/ here."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from tests.support.network import free_port

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p.name for p in (REPO / "examples").iterdir() if p.is_file())
STEPS = ["the initial snapshot", "the insert", "the text update", "the title update", "the delete"]


def run_demo(tmp_path: Path) -> str:
    env = {
        **os.environ,
        "DEMO_KAFKA_PORT": str(free_port()),
        "DEMO_POSTGRES_PORT": str(free_port()),
        "DEMO_CONNECT_PORT": str(free_port()),
        "DEMO_RUN_DIR": str(tmp_path / "demo"),
    }
    result = subprocess.run(
        ["scripts/demo", "--from-table"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    # scripts/test has bootstrapped and provisioned this checkout: nothing to install.
    assert "bootstrap:" not in output, output[:2000]
    assert "first use only" not in output, output[:2000]
    return output


def rows_after(output: str, step: str) -> dict[str, tuple[int, int]]:
    """Per row: (chunks in the index, chunks by chunking the row here), as printed."""
    block = output.split(f"== after {step}: the chunk table equals chunking", 1)[1]
    block = block.split("\n==", 1)[0]
    return {
        doc: (int(have), int(want))
        for doc, have, want in re.findall(r"^ {3}(\S+) .*?(\d+) +(\d+)$", block, re.MULTILINE)
    }


def test_the_table_demo_keeps_the_index_equal_to_the_rows(tmp_path: Path) -> None:
    output = run_demo(tmp_path)
    snapshot = rows_after(output, "the initial snapshot")
    assert sorted(snapshot) == [f"examples/{name}" for name in EXAMPLES]
    for step in STEPS:
        rows = rows_after(output, step)
        assert rows, step
        assert all(have == want > 0 for have, want in rows.values()), (step, rows)
    assert "notes/cdc" in rows_after(output, "the insert")
    assert rows_after(output, "the title update") == rows_after(output, "the text update")
    assert "the index's title of notes/cdc: Notes on CDC" in output
    deleted = rows_after(output, "the delete")
    assert "examples/api-reference.md" not in deleted
    nearest = output.split("== the nearest chunks to:", 1)[1].splitlines()[1:4]
    assert "examples/kafka-consumer-groups.md" in nearest[0], nearest
    assert "Static membership avoids a rebalance" in "\n".join(nearest)
