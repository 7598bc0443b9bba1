"""Every expected failure of the CLI is one line on stderr and a documented exit status.

1 = the command cannot do its job with what it was given (an unreadable or non-UTF-8 input,
no model built, the `model` extra missing); 2 = a setting, flag, `--param` or strategy name
is wrong. Never a traceback. Each command runs in a subprocess, as a user would meet it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

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
    assert last.startswith("chunkstream: invalid setting CHUNKSTREAM_MODEL_DIR: ")
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

    result = cli("chunk", str(good), str(latin1))
    assert result.returncode == 1
    line = one_line(result)  # nothing printed for the good file either
    assert str(latin1) in line
    assert "not UTF-8" in line

    result = cli("chunk", str(missing))
    assert result.returncode == 1
    assert f"cannot read {missing}: No such file or directory" in one_line(result)

    result = cli("chunk", str(tmp_path))  # a directory
    assert result.returncode == 1
    assert "cannot read" in one_line(result)

    for argv in (
        ["produce", "--bootstrap-servers", "127.0.0.1:1", str(latin1)],
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
