"""An independent numpy forward pass of a BERT sentence encoder, in float64.

It exists to check the ONNX graph without sentence-transformers or torch: same weights, same
tokens, but written the other way round — per-text (no padding, so no attention mask to get
wrong), batched matrix products via ``einsum``, GELU through ``math.erf``. Slow; meant for a
handful of sentences in tests, never for serving.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np
from numpy.typing import NDArray

from worker.model_making.source import BertConfig, Pooling

Weights = Mapping[str, NDArray[np.generic]]
F64 = NDArray[np.float64]
_Param = Callable[[str], F64]  # weight name → float64 array

_erf = np.frompyfunc(math.erf, 1, 1)


def reference_embedding(
    weights: Weights, config: BertConfig, token_ids: list[int], *, pooling: Pooling
) -> F64:
    """Embedding of one tokenised text (special tokens included), L2-normalised."""
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""

    def param(name: str) -> F64:
        return np.asarray(weights[prefix + name], dtype=np.float64)

    ids = np.asarray(token_ids, dtype=np.int64)
    x = (
        param("embeddings.word_embeddings.weight")[ids]
        + param("embeddings.position_embeddings.weight")[: len(ids)]
        + param("embeddings.token_type_embeddings.weight")[0]
    )
    x = _layer_norm(x, param, "embeddings.LayerNorm", config.layer_norm_eps)
    for layer in range(config.num_layers):
        x = _layer(x, param, f"encoder.layer.{layer}", config)
    pooled: F64 = x[0] if pooling == "cls" else x.mean(axis=0)
    normalised: F64 = pooled / max(float(np.linalg.norm(pooled)), 1e-12)
    return normalised


def _linear(x: F64, param: _Param, prefix: str) -> F64:
    # torch's Linear layout: weight is [out, in].
    out: F64 = np.einsum("si,oi->so", x, param(f"{prefix}.weight")) + param(f"{prefix}.bias")
    return out


def _layer_norm(x: F64, param: _Param, prefix: str, eps: float) -> F64:
    centred = x - x.mean(axis=-1, keepdims=True)
    variance = (centred**2).mean(axis=-1, keepdims=True)
    out: F64 = centred / np.sqrt(variance + eps) * param(f"{prefix}.weight")
    return out + param(f"{prefix}.bias")


def _layer(x: F64, param: _Param, prefix: str, config: BertConfig) -> F64:
    seq, heads, size = x.shape[0], config.num_heads, config.head_size
    q, k, v = (
        _linear(x, param, f"{prefix}.attention.self.{name}").reshape(seq, heads, size)
        for name in ("query", "key", "value")
    )
    scores = np.einsum("qhd,khd->hqk", q, k) / math.sqrt(size)
    scores -= scores.max(axis=-1, keepdims=True)
    probs = np.exp(scores)
    probs /= probs.sum(axis=-1, keepdims=True)
    context = np.einsum("hqk,khd->qhd", probs, v).reshape(seq, heads * size)
    x = _layer_norm(
        x + _linear(context, param, f"{prefix}.attention.output.dense"),
        param,
        f"{prefix}.attention.output.LayerNorm",
        config.layer_norm_eps,
    )
    inner = _linear(x, param, f"{prefix}.intermediate.dense")
    erf = np.asarray(_erf(inner / math.sqrt(2.0)), dtype=np.float64)
    inner = 0.5 * inner * (1.0 + erf)
    return _layer_norm(
        x + _linear(inner, param, f"{prefix}.output.dense"),
        param,
        f"{prefix}.output.LayerNorm",
        config.layer_norm_eps,
    )
