"""`chunkstream model build` and `chunkstream embed`, in process through the CLI's own
`main` (parser, handlers and the one-line failures)."""

from __future__ import annotations

import codecs
from pathlib import Path

import numpy as np
import pytest

from worker.cli import main
from worker.cli.models import read_lines
from worker.models.manifest import read_manifest


def run(*argv: str) -> int:
    return main(list(argv))


def test_model_build_then_embed_round_trip(tiny_source: Path, tmp_path: Path) -> None:
    out = tmp_path / "model"
    assert run("model", "build", "--source", str(tiny_source), "--out", str(out), "--int8") == 0
    assert read_manifest(out).build.int8

    lines = ["first line", "", "ثالث سطر", "fourth 🙂"]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for flags in ([], ["--int8"]):
        npy = tmp_path / f"out{len(flags)}"  # written as named: no ".npy" appended
        argv = ["embed", "--input", str(tmp_path / "in.txt"), "--output", str(npy)]
        assert run(*argv, "--model", str(out), *flags) == 0
        assert not npy.with_suffix(".npy").exists()
        vectors = np.load(npy)
        assert vectors.dtype == np.float32
        assert vectors.shape == (4, 32)
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-3)


def test_embed_writes_rows_in_input_order(tiny_source: Path, tmp_path: Path) -> None:
    from worker.model_making.build import build_model
    from worker.models.onnx_embedder import OnnxEmbedder

    out = tmp_path / "model"
    build_model(tiny_source, out)
    lines = [f"line {i} " + "word " * (i * 7 % 13) for i in range(30)]
    (tmp_path / "in.txt").write_text("\n".join(lines), encoding="utf-8")
    npy = tmp_path / "out.npy"
    argv = ["embed", "--input", str(tmp_path / "in.txt"), "--output", str(npy)]
    assert run(*argv, "--model", str(out)) == 0
    want = np.vstack([OnnxEmbedder.load(out).embed([line]) for line in lines])
    np.testing.assert_allclose(np.load(npy), want, atol=2e-5)


@pytest.mark.model
def test_embed_reproduces_golden_sentences(
    model_dir: Path, golden_dir: Path, tmp_path: Path
) -> None:
    npy = tmp_path / "golden.npy"
    sentences = golden_dir / "sentences.txt"
    assert (
        run("embed", "--input", str(sentences), "--output", str(npy), "--model", str(model_dir))
        == 0
    )
    got, want = np.load(npy), np.load(golden_dir / "embeddings.npy")
    assert got.shape == want.shape
    assert np.sum(got * want, axis=1).min() >= 0.9999


def test_build_refuses_a_non_bert_source(
    tiny_source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "src").mkdir()
    for item in tiny_source.iterdir():
        if item.is_file():
            (tmp_path / "src" / item.name).write_bytes(item.read_bytes())
    config = (tmp_path / "src" / "config.json").read_text().replace("BertModel", "T5EncoderModel")
    (tmp_path / "src" / "config.json").write_text(config.replace('"bert"', '"t5"'))
    assert (
        run("model", "build", "--source", str(tmp_path / "src"), "--out", str(tmp_path / "o")) == 1
    )
    assert "unsupported architecture 'T5EncoderModel'" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_embed_without_a_built_model_says_how_to_build(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "in.txt").write_text("x\n")
    argv = ["embed", "--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "o.npy")]
    assert run(*argv, "--model", str(tmp_path / "none")) == 1
    assert "chunkstream model build" in capsys.readouterr().err


def test_read_lines_splits_on_newline_only(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_text("a\u2028b\r\nc\n\nd", encoding="utf-8", newline="")
    assert read_lines(path) == ["a\u2028b", "c", "", "d"]
    path.write_text("", encoding="utf-8")
    assert read_lines(path) == []
    path.write_bytes(codecs.BOM_UTF8 + b"first\r\nsecond\n")
    assert read_lines(path) == ["first", "second"]  # the byte-order mark is not text
