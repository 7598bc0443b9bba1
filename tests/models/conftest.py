"""Fixtures for the embedding tests: the real model (built once per session) and tiny ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.models.tiny_bert import write_tiny_model

REPO_ROOT = Path(__file__).resolve().parents[2]
# Built models live where `chunkstream model build` puts them by default, so a developer's build
# and the test session's reuse each other (the manifest's digests decide whether it is current).
MODEL_CACHE = REPO_ROOT / ".cache" / "models" / "all-MiniLM-L6-v2"
GOLDEN_DIR = REPO_ROOT.parent / "shared" / "golden"


@pytest.fixture(scope="session")
def source_dir() -> Path:
    # scripts/bootstrap installs the `model` extra: a missing source is a broken setup, so it
    # fails loudly instead of letting the accuracy tests vanish from the run.
    from worker.model_making.source import SourceError, default_source_dir

    try:
        return default_source_dir()
    except SourceError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="session")
def model_dir(source_dir: Path) -> Path:
    """The real all-MiniLM-L6-v2, fp32 and int8, built here unless an intact build exists."""
    from worker.model_making.build import ensure_model

    ensure_model(source_dir, MODEL_CACHE, int8=True)
    return MODEL_CACHE


@pytest.fixture(scope="session")
def golden_dir() -> Path:
    if not (GOLDEN_DIR / "embeddings.npy").is_file():
        pytest.fail(
            f"golden embeddings not found at {GOLDEN_DIR} (shared/ must sit beside the repo)"
        )
    return GOLDEN_DIR


@pytest.fixture(scope="session")
def tiny_source(source_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_model(tmp_path_factory.mktemp("tiny-bert"), source_dir / "tokenizer.json")
