"""Which directories the builder accepts, and how it refuses the rest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.tiny_bert import write_tiny_model
from worker.model_making.source import SourceError, read_source


def test_the_packaged_minilm_reads_as_a_six_layer_bert(source_dir: Path) -> None:
    source = read_source(source_dir)
    assert source.config.architecture == "BertModel"
    assert source.config.num_layers == 6
    assert source.config.hidden_size == 384
    assert source.config.layer_norm_eps == 1e-12
    assert source.pooling == "mean"
    assert source.normalize
    assert source.max_seq_length == 256


def test_other_architecture_is_refused_by_name(source_dir: Path, tmp_path: Path) -> None:
    directory = write_tiny_model(
        tmp_path / "m", source_dir / "tokenizer.json", architecture="XLMRobertaModel"
    )
    config = json.loads((directory / "config.json").read_text())
    config["model_type"] = "xlm-roberta"
    (directory / "config.json").write_text(json.dumps(config))
    with pytest.raises(SourceError, match="unsupported architecture 'XLMRobertaModel'"):
        read_source(directory)


def test_unsupported_pooling_is_refused(source_dir: Path, tmp_path: Path) -> None:
    directory = write_tiny_model(tmp_path / "m", source_dir / "tokenizer.json", pooling="max")
    with pytest.raises(SourceError, match="pooling_mode_max_tokens"):
        read_source(directory)


def test_missing_files_are_named(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(SourceError, match=r"model\.safetensors, tokenizer\.json, modules\.json"):
        read_source(tmp_path)


def test_not_a_directory(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="not a directory"):
        read_source(tmp_path / "nope")
