"""Fixtures reused from elsewhere: the real model (built once per session by the embedding
tests' fixture) and the bundled tokenizer.json."""

from tests.chunking.conftest import tokenizer_path
from tests.models.conftest import model_dir, source_dir

__all__ = ["model_dir", "source_dir", "tokenizer_path"]
