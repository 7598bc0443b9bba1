"""The model2vec directory layout of a static model, read without loading it.

``model.safetensors`` (the ``embeddings`` matrix), ``tokenizer.json`` and ``config.json``
(``normalize``, default false; ``max_length`` in tokens, default 512, null for none). These
readers need only the standard library: the model room's reference (who a model is, how much
text it reads) uses them without loading tokenizers or the matrix.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from worker.models.manifest import ManifestError

MATRIX_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
TOKENIZER_FILE = "tokenizer.json"
MATRIX_TENSOR = "embeddings"  # model2vec's name for the token-vector matrix
DEFAULT_MAX_LENGTH = 512  # model2vec's default when config.json does not say


class StaticModelError(ManifestError):
    """The directory is not a usable static model; the message says what is wrong."""


def is_static_dir(directory: Path) -> bool:
    """A model2vec-layout directory (ours or foreign): it has the token-vector matrix file."""
    return (directory / MATRIX_FILE).is_file()


def static_identity(directory: Path) -> str:
    """Digest of what determines the vectors: the matrix file, the tokenizer, and the config
    keys that change the output. The same for our directories and foreign ones."""
    config = read_config(directory)
    digest = hashlib.sha256()
    for name in (MATRIX_FILE, TOKENIZER_FILE):
        digest.update(hashlib.sha256((directory / name).read_bytes()).digest())
    decisive = {"normalize": normalize_of(config), "max_length": max_length_of(config)}
    digest.update(json.dumps(decisive, sort_keys=True).encode())
    return digest.hexdigest()


def static_max_length(directory: Path) -> int | None:
    """Tokens the model reads (config.json's ``max_length``; None: the whole text)."""
    return max_length_of(read_config(directory))


def read_config(directory: Path) -> dict[str, Any]:
    path = directory / CONFIG_FILE
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StaticModelError(f"cannot read {path}: {exc}") from exc
    if not isinstance(config, dict):
        raise StaticModelError(f"{path}: expected a JSON object")
    return config


def normalize_of(config: dict[str, Any]) -> bool:
    value = config.get("normalize", False)
    if not isinstance(value, bool):
        raise StaticModelError(f"config.json: 'normalize' must be true or false, not {value!r}")
    return value


def max_length_of(config: dict[str, Any]) -> int | None:
    value = config.get("max_length", DEFAULT_MAX_LENGTH)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise StaticModelError("config.json: 'max_length' must be a positive integer or null")
    return value
