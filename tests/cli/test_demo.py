"""`scripts/demo`, README's first command, run as a user runs it: its own broker, the worker,
the sample documents, an edit and a delete, a summary.

scripts/test has bootstrapped this checkout, so the demo's install step must find everything
in place and say nothing (a second run starts in seconds); what it prints about the sink is
checked against the examples directory itself.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from tests.support.network import free_port

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p.name for p in (REPO / "examples").iterdir() if p.is_file())
EDITED = "examples/retrieval-notes.txt"
DELETED = "examples/api-reference.md"
# A chunk event as `chunkstream tail` prints it: doc #index/count [start:end] ..., and a tombstone.
CHUNK_LINE = re.compile(r"^ {3}(\S+) #(\d+)/(\d+) \[(\d+):(\d+)\] \d+ tok \w+: (.*)$")
TOMBSTONE_LINE = re.compile(r"^ {3}TOMBSTONE [0-9a-f]{32} of (\S+)$")


def sink_after(output: str, step: str) -> dict[str, int]:
    """The chunks per document the demo printed for the sink after ``step``."""
    block = output.split(f"== the sink after: {step}\n", 1)[1].split("\n==", 1)[0]
    return {doc: int(n) for doc, n in re.findall(r"^ {3}(\S+): (\d+) chunks$", block, re.MULTILINE)}


def run_demo(tmp_path: Path, *args: str) -> str:
    env = {
        **os.environ,
        "DEMO_KAFKA_PORT": str(free_port()),
        "DEMO_POSTGRES_PORT": str(free_port()),
        "DEMO_CONNECT_PORT": str(free_port()),
        "DEMO_RUN_DIR": str(tmp_path / "demo"),
    }
    env.pop("CHUNKSTREAM_STRATEGY", None)
    result = subprocess.run(
        ["scripts/demo", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    # Nothing to install on a bootstrapped checkout: no step announced itself.
    assert "bootstrap:" not in output, output[:2000]
    return output


def check_the_edit(output: str, run_dir: Path, chunks_now: int) -> None:
    """What the demo lists as the chunk topic's records of the edit: the new version's chunk
    events, each of its chunks once and none of the first version's (their offsets are checked
    against the edited file the demo produced), then the tombstones of the retracted chunks."""
    block = output.split("records of this edit", 1)[1].split("\n", 1)[1].split("\n==", 1)[0]
    lines = block.splitlines()
    chunks = [m for m in map(CHUNK_LINE.match, lines) if m is not None]
    tombstones = [m for m in map(TOMBSTONE_LINE.match, lines) if m is not None]
    assert len(chunks) + len(tombstones) == len(lines), block
    assert chunks, block
    assert tombstones, block
    assert lines.index(tombstones[0].string) == len(chunks), "tombstones come after the events"
    assert {m[1] for m in chunks} | {m[1] for m in tombstones} == {EDITED}
    assert sorted(int(m[2]) for m in chunks) == list(range(1, chunks_now + 1))
    assert {int(m[3]) for m in chunks} == {chunks_now}
    text = (run_dir / "edit" / EDITED).read_text(encoding="utf-8")
    for m in chunks:
        preview = m[6].removesuffix("...")
        assert text[int(m[4]) : int(m[5])].replace("\n", "⏎ ").startswith(preview), m.string


def check_the_sink(output: str, run_dir: Path) -> dict[str, int]:
    """The sink the demo showed after each step, the edit's records, the summary; what the
    sink holds at the end."""
    first = sink_after(output, "the first versions")
    assert sorted(first) == [f"examples/{name}" for name in EXAMPLES]
    assert all(n > 0 for n in first.values())
    edited = sink_after(output, "the edit")
    assert set(edited) == set(first)
    check_the_edit(output, run_dir, edited[EDITED])
    # The delete removed one document's chunks and nothing else.
    deleted = sink_after(output, "the delete")
    assert DELETED not in deleted
    assert deleted == {d: n for d, n in edited.items() if d != DELETED}

    summary = re.search(
        r"== summary: (\d+) documents, then 1 edit and 1 delete \((\d+) input records\); "
        r"(\d+) chunk events; the sink ends with (\d+) documents, (\d+) chunks; "
        r"(\d+) dead letters",
        output,
    )
    assert summary is not None, output[-2000:]
    documents, records, events, left, held, dead_letters = (int(g) for g in summary.groups())
    assert documents == len(EXAMPLES)
    assert records == len(EXAMPLES) + 2  # the first versions, the edit, the delete
    # Every first version's chunks, then every chunk of the edited version (unchanged ones are
    # emitted again by default); a delete publishes only tombstones.
    assert events == sum(first.values()) + edited[EDITED]
    assert (left, held) == (len(deleted), sum(deleted.values()))
    assert dead_letters == 0
    return deleted


def test_the_demo_runs_end_to_end(tmp_path: Path) -> None:
    output = run_demo(tmp_path)
    check_the_sink(output, tmp_path / "demo")
    assert "== the index" not in output


def test_the_demo_into_postgres_keeps_the_index_equal_to_the_sink(tmp_path: Path) -> None:
    output = run_demo(tmp_path, "--index")
    check_the_sink(output, tmp_path / "demo")
    for step in ("the first versions", "the edit", "the delete"):
        index = output.split(
            f"== the index (PostgreSQL table chunks, via Kafka Connect) after: {step}", 1
        )[1]
        block = index.split("\n", 1)[1].split("\n==", 1)[0]
        counts = dict(re.findall(r"^ {3}(\S+): (\d+) chunks$", block, re.MULTILINE))
        assert {d: int(n) for d, n in counts.items()} == sink_after(output, step), step
    # The similarity query: the answer's chunk, by its offsets into the example file itself,
    # is among the three nearest.
    nearest = output.split("== the nearest chunks to: ", 1)[1].split("\n==", 1)[0]
    hits = re.findall(r"^ {3}[\d.]+ {2}(\S+) \[(\d+):(\d+)\]", nearest, re.MULTILINE)
    assert len(hits) == 3, nearest
    texts = [(REPO / doc).read_bytes().decode()[int(start) : int(end)] for doc, start, end in hits]
    assert any("Static membership avoids a rebalance" in text for text in texts), nearest
