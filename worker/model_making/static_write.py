"""Writing a static model directory in model2vec's layout (``chunkstream model distill``).

The run-time room reads these files (:mod:`worker.models.static`); only the model-making room
writes them. Deterministic: the same inputs give the same bytes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from worker.models.manifest import StaticManifest, write_manifest
from worker.models.static_layout import (
    CONFIG_FILE,
    DEFAULT_MAX_LENGTH,
    MATRIX_FILE,
    MATRIX_TENSOR,
    TOKENIZER_FILE,
    static_identity,
)
from worker.models.tensorfile import write_tensors


def write_static_model(
    directory: Path,
    matrix: NDArray[np.floating[Any]],
    tokenizer_json: bytes,
    *,
    normalize: bool = True,
    max_length: int = DEFAULT_MAX_LENGTH,
    extra_config: dict[str, Any] | None = None,
) -> str:
    """Write ``model.safetensors``, ``tokenizer.json`` and ``config.json`` in model2vec's layout;
    returns the directory's identity."""
    write_tensors(directory / MATRIX_FILE, {MATRIX_TENSOR: np.asarray(matrix, dtype=np.float32)})
    (directory / TOKENIZER_FILE).write_bytes(tokenizer_json)
    config = {
        "model_type": "model2vec",
        "architectures": ["StaticModel"],
        "hidden_dim": int(matrix.shape[1]),
        "normalize": normalize,
        "max_length": max_length,
        **(extra_config or {}),
    }
    (directory / CONFIG_FILE).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    return static_identity(directory)


def write_static_manifest(directory: Path, manifest: StaticManifest) -> None:
    write_manifest(directory, manifest)
