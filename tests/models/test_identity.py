"""Model identity: what the worker puts into chunk ids is the manifest's ``identity``, which
moves with what determines the vectors and with nothing else."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from safetensors.numpy import save_file

from tests.support.tiny_bert import tiny_weights, write_tiny_model
from worker.config import Settings, load_settings
from worker.errors import ModelNotBuilt
from worker.inference.serving import boundary_ref
from worker.model_making.build import build_model
from worker.models.identity import variant_identity
from worker.models.manifest import MODEL_NAME, ManifestError, read_any_manifest, read_manifest


def identity_of(directory: Path, *, int8: bool = False) -> str:
    head = read_any_manifest(directory)
    assert head is not None
    return variant_identity(head, directory, int8=int8)


def test_rebuilds_agree_and_each_determinant_moves_it(source_dir: Path, tmp_path: Path) -> None:
    tokenizer = source_dir / "tokenizer.json"
    base = write_tiny_model(tmp_path / "src", tokenizer)
    first = build_model(base, tmp_path / "a", int8=True)
    second = build_model(base, tmp_path / "b", int8=True)
    assert first.identity is not None
    assert len(first.identity) == 64
    assert first.identity == second.identity
    # An fp32-only build of the same source serves the same fp32 vectors: same identity.
    assert build_model(base, tmp_path / "c").identity == first.identity
    assert identity_of(tmp_path / "a") != identity_of(tmp_path / "a", int8=True)

    others = {
        "weights": write_tiny_model(tmp_path / "w", tokenizer),
        "pooling": write_tiny_model(tmp_path / "p", tokenizer, pooling="cls"),
        "window": write_tiny_model(tmp_path / "m", tokenizer, max_seq_length=32),
    }
    save_file(tiny_weights(seed=1), str(others["weights"] / "model.safetensors"))
    edited = tmp_path / "t"
    shutil.copytree(base, edited)
    raw = json.loads((edited / "tokenizer.json").read_text())
    raw["normalizer"] = None  # a tokenizer that cases text differently
    (edited / "tokenizer.json").write_text(json.dumps(raw))
    others["tokenizer"] = edited
    config = tmp_path / "e"
    shutil.copytree(base, config)
    raw = json.loads((config / "config.json").read_text())
    raw["layer_norm_eps"] = 1e-6
    (config / "config.json").write_text(json.dumps(raw))
    others["config"] = config
    seen = {first.identity}
    for name, source in others.items():
        identity = build_model(source, tmp_path / f"out-{name}").identity
        assert identity is not None
        assert identity not in seen, name
        seen.add(identity)


def test_the_worker_reads_the_identity_not_the_file_bytes(
    tiny_source: Path, tmp_path: Path
) -> None:
    out = tmp_path / "model"
    build_model(tiny_source, out, int8=True)
    settings = load_settings({}, env={"CHUNKSTREAM_MODEL_DIR": str(out)})
    before = model_identity(settings)
    assert before == identity_of(out)
    # Other serialised bytes of the same model (as another onnx version writes them).
    (out / MODEL_NAME).write_bytes((out / MODEL_NAME).read_bytes() + b"\0")
    raw = json.loads((out / "manifest.json").read_text())
    raw["files"][MODEL_NAME] = "0" * 64
    (out / "manifest.json").write_text(json.dumps(raw))
    assert model_identity(settings) == before
    int8 = load_settings({}, env={"CHUNKSTREAM_MODEL_DIR": str(out), "CHUNKSTREAM_MODEL_INT8": "1"})
    assert model_identity(int8) not in (None, before)
    # The identity field is the source of truth: another identity, another model id.
    raw["identity"] = "f" * 64
    (out / "manifest.json").write_text(json.dumps(raw))
    assert model_identity(settings) not in (None, before)
    assert json.loads((out / "manifest.json").read_text())["identity"] == "f" * 64
    assert read_manifest(out).identity == "f" * 64  # an ONNX manifest, read as one


def test_static_manifests_and_old_manifests(tmp_path: Path) -> None:
    static = tmp_path / "static"
    static.mkdir()
    (static / "manifest.json").write_text(
        json.dumps({"kind": "static", "identity": "ab" * 32, "dimension": 256, "other": 1})
    )
    with pytest.raises(ManifestError, match="other"):  # a static manifest has a fixed shape
        read_any_manifest(static)
    (static / "manifest.json").write_text(
        json.dumps(
            {
                "kind": "static",
                "identity": "ab" * 32,
                "dimension": 256,
                "max_seq_length": 514,
                "source": "s",
                "corpus": [],
                "recipe": "r",
                "distiller_version": 1,
                "files": {},
            }
        )
    )
    head = read_any_manifest(static)
    assert head is not None
    assert variant_identity(head, static, int8=False) == "ab" * 8
    assert read_any_manifest(tmp_path / "missing") is None
    old = tmp_path / "old"
    old.mkdir()
    (old / "manifest.json").write_text(json.dumps({"source": "x", "files": {}}))
    with pytest.raises(ManifestError, match="rebuild"):
        read_any_manifest(old)
    with pytest.raises(ModelNotBuilt, match="rebuild"):
        model_identity(load_settings({}, env={"CHUNKSTREAM_MODEL_DIR": str(old)}))


def model_identity(settings: Settings) -> str:
    """Who the worker's boundary model is, as chunk ids carry it."""
    return boundary_ref(settings).identity
