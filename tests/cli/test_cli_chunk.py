"""`chunkstream chunk`: offline chunking of files, one JSON object per chunk."""

from __future__ import annotations

import codecs
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from worker.cli.inputs import content_type_for

REPO = Path(__file__).resolve().parents[2]
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
    # In characters when asked for characters...
    rows = chunk(
        "sentence", "--param", "chunk_size=40", "--param", "tokenizer=character", str(EXAMPLES[0])
    )
    assert rows
    assert all(len(str(row["text"])) <= 40 for row in rows)
    # ...and by default in the retrieval model's tokens, counted here by `tokenizers` itself.
    from tokenizers import Tokenizer

    vocabulary = Tokenizer.from_file(str(REPO / ".cache/models/all-MiniLM-L6-v2/tokenizer.json"))
    vocabulary.no_truncation()
    vocabulary.no_padding()
    rows = chunk("sentence", "--param", "chunk_size=40", str(EXAMPLES[0]))
    counted = [len(vocabulary.encode(str(r["text"]), add_special_tokens=False).ids) for r in rows]
    assert rows
    assert max(counted) <= 40
    assert counted == [row["token_count"] for row in rows]
    assert any(len(str(row["text"])) > 40 for row in rows), "tokens, not characters"
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


STRATEGIES = ["sentence", "adaptive", "lexical", "semantic", "sdpm", "context"]


def cli(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "worker.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        env=None if env is None else {**os.environ, **env},
    )


def rows_of(result: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def assert_offsets_index(text: str, rows: list[dict[str, Any]]) -> None:
    """Each chunk is the text at its offsets (a `spans` chunk: its pieces, joined by \\n)."""
    assert rows
    for row in rows:
        if "spans" in row:
            pieces = (text[s["start"] : s["end"]] for s in row["spans"])
            assert row["text"] == "\n".join(pieces)
        else:
            assert row["text"] == text[row["start_index"] : row["end_index"]]


@pytest.fixture(scope="module")
def long_markdown(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """~300 KB of markdown: its chunks as JSON fill a pipe several times over (64 KiB)."""
    path = tmp_path_factory.mktemp("long") / "long.md"
    body = "\n\n".join(p.read_text(encoding="utf-8") for p in EXAMPLES)
    path.write_text("\n\n".join([body] * (300_000 // len(body) + 1)), encoding="utf-8")
    return path


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_head_closing_the_pipe_ends_quietly(strategy: str, long_markdown: Path) -> None:
    # `chunkstream chunk FILE | head -1` in a real shell: the status of chunkstream itself.
    script = '"$@" | head -1; exit "${PIPESTATUS[0]}"'
    command = [sys.executable, "-m", "worker.cli", "chunk", "--strategy", strategy]
    result = subprocess.run(
        ["bash", "-c", script, "bash", *command, str(long_markdown)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert result.returncode in (0, 141)
    assert result.stderr == ""
    assert json.loads(result.stdout)["index"] == 0


def test_stdout_closed_before_the_first_write_ends_quietly() -> None:
    # The other path: everything still sits in Python's buffer when the reader is gone, so
    # the failure comes at the final flush (where an uncaught one prints "Exception ignored").
    with subprocess.Popen(
        [sys.executable, "-m", "worker.cli", "chunk", str(EXAMPLES[0])],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
    ) as proc:
        assert proc.stdout is not None
        assert proc.stderr is not None
        proc.stdout.close()
        assert proc.stderr.read() == b""
        assert proc.wait(timeout=120) == 141


def test_dash_reads_stdin_as_plain_text_unless_told(tmp_path: Path) -> None:
    # No suffix to go by: plain text, unless --content-type says so; a suffix decides
    # otherwise, and the flag overrides it either way.
    assert content_type_for("-") == "text/plain"
    assert content_type_for("-", "text/markdown") == "text/markdown"
    assert content_type_for("notes.md") == "text/markdown"
    assert content_type_for("notes.MARKDOWN") == "text/markdown"
    assert content_type_for("notes.md", "text/plain") == "text/plain"
    assert content_type_for("notes.txt") == "text/plain"
    source = REPO / "examples" / "api-reference.md"
    text = source.read_text(encoding="utf-8")
    from_stdin = rows_of(cli("chunk", "--strategy", "lexical", "-", stdin=text))
    assert {row["doc_id"] for row in from_stdin} == {"-"}
    assert_offsets_index(text, from_stdin)
    as_markdown = rows_of(
        cli("chunk", "--strategy", "lexical", "--content-type", "text/markdown", "-", stdin=text)
    )
    by_suffix = rows_of(cli("chunk", "--strategy", "lexical", str(source)))
    strip = [{k: v for k, v in row.items() if k != "doc_id"} for row in by_suffix]
    assert [{k: v for k, v in row.items() if k != "doc_id"} for row in as_markdown] == strip
    as_plain = rows_of(
        cli("chunk", "--strategy", "lexical", "--content-type", "text/plain", str(source))
    )
    assert [row["text"] for row in as_plain] == [row["text"] for row in from_stdin]
    # Since issue 21 lexical, like every rule strategy, reads a document's structure from its
    # text whatever its content type: read as plain text, a heading still joins what it opens.
    assert [row["text"] for row in from_stdin] == [row["text"] for row in as_markdown]
    for row in from_stdin:
        lines = [line for line in str(row["text"]).splitlines() if line.strip()]
        assert not all(line.startswith("#") for line in lines), row["text"]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_offsets_index_a_crlf_file_with_a_byte_order_mark(strategy: str, tmp_path: Path) -> None:
    prose = (REPO / "examples" / "api-reference.md").read_text(encoding="utf-8")
    path = tmp_path / "windows.txt"
    path.write_bytes(codecs.BOM_UTF8 + prose.replace("\n", "\r\n").encode("utf-8"))
    # The file's own text, read independently: the bytes after the BOM, CRLF kept.
    text = path.read_bytes()[len(codecs.BOM_UTF8) :].decode("utf-8")
    assert "\r\n" in text
    assert "\ufeff" not in text
    rows = rows_of(cli("chunk", "--strategy", strategy, str(path)))
    assert_offsets_index(text, rows)
    assert rows[0]["start_index"] == 0 or strategy == "context"
    assert any("\r\n" in row["text"] for row in rows)
    assert not any("\ufeff" in row["text"] for row in rows)


# The effective defaults of the sizes left unset, as docs/concepts/strategies.md states them:
# in tokens of all-MiniLM-L6-v2 (window 254), and in characters (no retrieval model).
EFFECTIVE = {
    "tokens": {
        "sentence": {"chunk_size": "96"},
        "adaptive": {"base_size": "128", "min_size": "25", "max_size": "254", "overlap": "32"},
        "lexical": {"chunk_size": "254"},
        "semantic": {"chunk_size": "254", "min_chunk_size": "31"},
        "sdpm": {"chunk_size": "254", "min_chunk_size": "31"},
        "context": {
            "chunk_size": "254", "core_size": "190", "overlap": "31", "min_chunk_size": "31",
        },
    },
    "characters": {
        "sentence": {"chunk_size": "1000"},
        "adaptive": {"base_size": "512", "min_size": "100", "max_size": "1500", "overlap": "128"},
        "lexical": {"chunk_size": "1500"},
        "semantic": {"chunk_size": "1000", "min_chunk_size": "125"},
        "sdpm": {"chunk_size": "1000", "min_chunk_size": "125"},
        "context": {
            "chunk_size": "1000", "core_size": "750", "overlap": "125", "min_chunk_size": "125",
        },
    },
}  # fmt: skip


@pytest.mark.parametrize("unit", ["tokens", "characters"])
def test_help_lists_every_strategy_with_its_parameters_and_effective_defaults(unit: str) -> None:
    """A size left unset is printed as what it is where ``chunk`` runs: in the retrieval
    model's tokens when one is found (the checkout's), else in characters (an empty model
    search path), never "unset" (issue 46, item 10)."""
    import msgspec

    from worker.chunking import registry

    env = {"CHUNKSTREAM_MODEL_PATH": "/nonexistent"} if unit == "characters" else None
    result = cli("chunk", "--help", env=env)
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert ("tokens of the retrieval model" in result.stdout) == (unit == "tokens")
    for name in registry.names():
        strategy = registry.get(name)
        at = next(i for i, line in enumerate(lines) if line.strip().split(" ")[0] == name)
        assert lines[at + 1].strip() == strategy.summary
        for field in msgspec.structs.fields(strategy.params_type):
            entry = next(line for line in lines[at + 2 :] if line.split()[0] == field.name)
            default = "unset" if field.default is None else str(field.default)
            default = EFFECTIVE[unit][name].get(field.name, default)
            assert entry.endswith(f"; default {default}"), entry
    assert "offset 0 is the first character after it" in result.stdout  # the BOM rule


def test_spans_have_the_chunk_events_shape(tmp_path: Path) -> None:
    """`context`'s spans are printed as chunk events carry them ([{"start": s, "end": e}]),
    checked with a JSON Schema validator nobody here wrote against the event schema."""
    import jsonschema

    from tests.support.long_document import long_markdown

    path = tmp_path / "long.md"
    path.write_text(long_markdown(120_000, seed=5), encoding="utf-8")
    schema = json.loads((REPO / "schemas" / "chunk-event.schema.json").read_text())
    spans_schema = {
        "$defs": schema["$defs"],
        **schema["$defs"]["ChunkEvent"]["properties"]["spans"],
    }
    rows = rows_of(cli("chunk", "--strategy", "context", str(path)))
    with_spans = [row for row in rows if "spans" in row]
    assert with_spans, "no chunk of several pieces to check"
    text = path.read_text(encoding="utf-8")
    assert_offsets_index(text, rows)
    for row in with_spans:
        jsonschema.validate(row["spans"], spans_schema)
        assert all(set(span) == {"start", "end"} for span in row["spans"])


@pytest.mark.timeout(300)
def test_output_streams_per_document(tmp_path: Path) -> None:
    # The first file's chunks arrive while stdin, the second input, is still open: nothing
    # waits for every input to be read. (Without streaming this read would never return.)
    first = REPO / "examples" / "api-reference.md"
    expected = rows_of(cli("chunk", str(first)))
    with subprocess.Popen(
        [sys.executable, "-m", "worker.cli", "chunk", str(first), "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    ) as proc:
        assert proc.stdin is not None
        assert proc.stdout is not None
        got = [json.loads(proc.stdout.readline()) for _ in expected]
        assert got == expected
        proc.stdin.write("Late text. Arrives after the first file's chunks.")
        proc.stdin.close()
        rest = [json.loads(line) for line in proc.stdout]
        assert proc.wait(timeout=120) == 0
    assert rest
    assert [row["doc_id"] for row in rest] == ["-"] * len(rest)


@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    "strategy", ["sentence", "adaptive", "lexical", "semantic", "sdpm", "context"]
)
def test_a_hash_without_spaces_is_cut_to_the_character_cap(strategy: str, tmp_path: Path) -> None:
    """Issue 46's reproduction, as a user runs it, on the real models: a hash of 300,000 hex
    digits (one unknown token to WordPiece) was one chunk of 300,021 characters and 8 tokens
    in every strategy. Now no chunk is over 16 characters a token of the window (254)."""
    import random

    from tokenizers import Tokenizer

    from worker.chunking.text.character_cap import CHARACTERS_PER_TOKEN
    from worker.models.reference import find

    digits = random.Random(46).randbytes(150_000).hex()
    path = tmp_path / "hex.txt"
    path.write_text(f"Here is a hash: {digits} end.\n", encoding="utf-8")
    text = path.read_text(encoding="utf-8")
    rows = chunk(strategy, str(path))
    retrieval = find("retrieval", None)
    assert retrieval.window == 254
    tokenizer = Tokenizer.from_file(str(retrieval.tokenizer))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    assert len(rows) >= len(text) // (CHARACTERS_PER_TOKEN * 254)
    solid = "".join("".join(str(r["text"]).split()) for r in rows)  # every character, in order
    assert solid == "".join(text.split())
    for row in rows:
        body = str(row["text"])
        assert len(body) <= CHARACTERS_PER_TOKEN * 254
        assert body == text[int(str(row["start_index"])) : int(str(row["end_index"]))]
        assert row["token_count"] == len(tokenizer.encode(body, add_special_tokens=False).ids)
        assert int(str(row["token_count"])) <= 254
