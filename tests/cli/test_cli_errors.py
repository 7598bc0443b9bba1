"""Every expected failure of the CLI is one line on stderr and a documented exit status.

1 = the command cannot do its job with what it was given (an unreadable or non-UTF-8 input,
no model built, the `model` extra missing, an unwritable output, missing schemas); 2 = a
setting, flag, `--param` or strategy name is wrong; 69 = Kafka cannot be reached. Never a
traceback. Each command runs in a subprocess, as a user would meet it.
"""

from __future__ import annotations

import codecs
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Runs the CLI with `onnx` and `safetensors` unimportable, as after a plain `pip install .`.
WITHOUT_MODEL_EXTRA = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("onnx", "safetensors"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Block())
from worker.cli import main
sys.exit(main(sys.argv[1:]))
"""


def cli(
    *argv: str, cwd: Path = REPO, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "worker.cli", *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("chunkstream: ")
    assert result.stdout == ""
    return lines[0]


@pytest.mark.parametrize("strategy", ["semantic", "sdpm", "context"])
def test_chunk_without_a_built_model_says_the_command_that_builds_it(
    tmp_path: Path, strategy: str
) -> None:
    doc = tmp_path / "doc.txt"
    doc.write_text("One sentence. Another one.", encoding="utf-8")
    # No model anywhere on the search path: the message says every place it looked.
    empty = [tmp_path / "cache", tmp_path / "share"]
    result = cli(
        "chunk",
        "--strategy",
        strategy,
        str(doc),
        cwd=tmp_path,
        env={"CHUNKSTREAM_MODEL_PATH": os.pathsep.join(map(str, empty))},
    )
    assert result.returncode == 1
    line = one_line(result)
    assert (
        f"looked in {empty[0]}/all-MiniLM-L6-v2-static, {empty[1]}/all-MiniLM-L6-v2-static" in line
    )
    assert "`chunkstream model build` then `chunkstream model distill`" in line

    named = cli("chunk", "--strategy", strategy, "--model", str(tmp_path / "m"), str(doc))
    assert named.returncode == 1
    assert f"`chunkstream model build --out {tmp_path / 'm'}`" in one_line(named)


def test_the_worker_without_a_built_model_names_the_setting_and_the_command(
    tmp_path: Path,
) -> None:
    # Refused at start-up, before any broker is contacted (none listens on this address).
    result = cli(
        "run",
        "--strategy",
        "semantic",
        "--model-dir",
        str(tmp_path),
        "--metrics-port",
        "0",
        "--bootstrap-servers",
        "127.0.0.1:1",
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]  # after the JSON start-up banner
    assert last.startswith("chunkstream: invalid setting CHUNKSTREAM_MODEL_DIR (--model-dir): ")
    assert f"`chunkstream model build --out {tmp_path}`" in last


def test_model_build_without_the_model_extra_says_what_to_install(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_MODEL_EXTRA, "model", "build", "--out", str(tmp_path / "m")],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert result.returncode == 1
    assert "pip install 'chunkstream[model]'" in one_line(result)
    assert not (tmp_path / "m").exists()


def test_unreadable_and_non_utf8_inputs(tmp_path: Path) -> None:
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("caf\xe9 au lait.".encode("latin-1"))
    missing = tmp_path / "missing.txt"
    good = tmp_path / "good.txt"
    good.write_text("Fine. Also fine.", encoding="utf-8")

    # Output streams per document: the good file's chunks are printed, complete, before the
    # file that is not UTF-8 stops the run with one line and status 1.
    result = cli("chunk", str(good), str(latin1))
    assert result.returncode == 1
    assert result.stderr == f"chunkstream: cannot read {latin1}: not UTF-8 (byte 3 is 0xe9)\n"
    alone = cli("chunk", str(good))
    assert alone.returncode == 0
    assert alone.stdout
    assert result.stdout == alone.stdout

    # A path that cannot be opened is found before anything is printed.
    result = cli("chunk", str(good), str(missing))
    assert result.returncode == 1
    assert f"cannot read {missing}: No such file or directory" in one_line(result)

    result = cli("chunk", str(tmp_path))  # a directory
    assert result.returncode == 1
    assert "cannot read" in one_line(result)

    bom = tmp_path / "bom.txt"  # the byte offset counts the BOM: it is a position in the file
    bom.write_bytes(codecs.BOM_UTF8 + b"ok \xff")
    result = cli("chunk", str(bom))
    assert result.returncode == 1
    assert one_line(result) == f"chunkstream: cannot read {bom}: not UTF-8 (byte 6 is 0xff)"

    for argv in (
        ["produce", "--bootstrap-servers", "127.0.0.1:1", str(good), str(latin1)],
        ["embed", "--input", str(latin1), "--output", str(tmp_path / "o.npy")],
    ):
        result = cli(*argv)
        assert result.returncode == 1, argv
        assert str(latin1) in one_line(result)


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--param", "chunk_size=zero"], "chunk_size"),
        (["--param", "no_such_param=3"], "no_such_param"),
        (["--param", "chunk_size"], "chunk_size"),
        (["--strategy", "no-such-strategy"], "no-such-strategy"),
    ],
)
def test_bad_params_and_strategies_name_what_is_wrong(argv: list[str], named: str) -> None:
    result = cli("chunk", *argv, str(REPO / "examples" / "api-reference.md"))
    assert result.returncode == 2
    assert named in one_line(result)


@pytest.mark.parametrize(
    ("param", "message"),
    [
        ("chunk_size=1.5", "strategy 'sentence': parameter chunk_size must be an integer >= 1, "
         "got '1.5'"),
        ("chunk_size=0", "strategy 'sentence': parameter chunk_size must be an integer >= 1, "
         "got '0'"),
        ("chunk_size", "--param 'chunk_size' is not NAME=VALUE (e.g. --param chunk_size=500)"),
        ("=3", "--param '=3' is not NAME=VALUE (e.g. --param chunk_size=500)"),
        ("size=3", "strategy 'sentence' has no parameter 'size' (its parameters: chunk_size, "
         "tokenizer)"),
    ],
)  # fmt: skip
def test_param_errors_name_the_flag_and_what_the_value_must_be(param: str, message: str) -> None:
    result = cli("chunk", "--param", param, str(REPO / "examples" / "api-reference.md"))
    assert result.returncode == 2
    assert one_line(result) == f"chunkstream: {message}"
    assert "CHUNKSTREAM_PARAM" not in result.stderr


def test_parameter_errors_come_before_the_model_and_the_files(tmp_path: Path) -> None:
    result = cli(
        "chunk", "--strategy", "semantic", "--param", "threshold=-1", str(tmp_path / "none"),
        env={"CHUNKSTREAM_MODEL_PATH": str(tmp_path)},
    )  # fmt: skip
    assert result.returncode == 2
    assert one_line(result) == (
        "chunkstream: strategy 'semantic': parameter threshold must be a number >= 0.0, got '-1'"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["chunk"], "chunk: the following arguments are required: FILE "
         "(see `chunkstream chunk --help`)"),
        (["chunk", "--content-type", "text/html", "x"], "chunk: argument --content-type: "
         "invalid choice: 'text/html' (choose from 'text/plain', 'text/markdown') "
         "(see `chunkstream chunk --help`)"),
        (["chunk", "-", "-"], "'-' (stdin) may be given only once"),
        (["no-such-command"], "argument command: invalid choice: 'no-such-command' (choose from "
         "'run', 'produce', 'tail', 'lag', 'topics', 'delete', 'sink', 'chunk', 'settings', "
         "'schema', 'model', "
         "'embed') (see `chunkstream --help`)"),
    ],
)  # fmt: skip
def test_usage_errors_are_one_line_with_status_2(argv: list[str], message: str) -> None:
    result = cli(*argv)
    assert result.returncode == 2
    assert one_line(result) == f"chunkstream: {message}"


def test_embed_to_a_missing_directory_fails_before_embedding(tmp_path: Path) -> None:
    texts = tmp_path / "in.txt"
    texts.write_text("one\ntwo\n", encoding="utf-8")
    out = tmp_path / "missing" / "dir" / "x.npy"
    # No model anywhere: the output is checked first, so its message is the one given.
    result = cli(
        "embed", "--input", str(texts), "--output", str(out),
        env={"CHUNKSTREAM_MODEL_PATH": str(tmp_path / "models")},
    )  # fmt: skip
    assert result.returncode == 1
    assert one_line(result) == f"chunkstream: cannot write {out}: no directory {out.parent}"


def test_schema_check_says_missing_not_out_of_date(tmp_path: Path) -> None:
    result = cli("schema", "--check", cwd=tmp_path)  # outside the checkout: no schemas/ here
    assert result.returncode == 1
    assert one_line(result) == (
        f"chunkstream: schema --check: no directory schemas (from {tmp_path}); run it in the "
        "checkout or name the directory with --out"
    )
    out = tmp_path / "schemas"
    assert cli("schema", "--out", str(out)).returncode == 0
    (out / "asyncapi.json").unlink()
    (out / "chunk-event.schema.json").write_text("{}\n", encoding="utf-8")
    result = cli("schema", "--check", "--out", str(out))
    assert result.returncode == 1
    assert one_line(result) == (
        f"chunkstream: schemas missing from {out}: asyncapi.json; out of date in {out}: "
        f"chunk-event.schema.json; run `chunkstream schema --out {out}`"
    )
    assert cli("schema", "--out", str(out)).returncode == 0
    assert cli("schema", "--check", "--out", str(out)).stdout == "schemas up to date\n"


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A local port bound by this test and never listened on: every connection is refused,
    and no other process can take the port while the test runs."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield held.getsockname()[1]


@pytest.mark.parametrize(
    "argv",
    [
        ["tail"],
        ["tail", "--json", "--max", "1"],
        ["lag", "--wait", "1"],
        ["topics"],
        ["produce", str(REPO / "examples" / "api-reference.md")],
    ],
    ids=lambda argv: argv[0] + "".join(argv[1:2]),
)
def test_kafka_tools_against_an_unreachable_broker(argv: list[str], closed_port: int) -> None:
    # Not one CHUNKSTREAM_* setting from the caller's environment: the message is exact.
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHUNKSTREAM_")}
    result = subprocess.run(
        [sys.executable, "-m", "worker.cli", *argv, "--bootstrap-servers",
         f"127.0.0.1:{closed_port}"],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=120,
    )  # fmt: skip
    assert result.returncode == 69
    assert result.stdout == ""
    assert result.stderr == (
        f"chunkstream: cannot connect to the Kafka brokers at 127.0.0.1:{closed_port} "
        f"(ConnectionRefusedError(111, \"Connect call failed ('127.0.0.1', {closed_port})\")): "
        "check CHUNKSTREAM_BOOTSTRAP_SERVERS and CHUNKSTREAM_SECURITY_PROTOCOL\n"
    )
