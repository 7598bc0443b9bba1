"""A tiny random BERT in sentence-transformers layout, written on the fly for fast build tests.

Random weights exercise every path of the graph (embeddings, masked attention, GELU, pooling,
normalisation) in milliseconds; the real model's accuracy is checked separately against the
golden embeddings. The real tokenizer.json is reused so token ids match a real vocabulary.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

VOCAB = 30522
HIDDEN = 32
HEADS = 4
LAYERS = 2
INTERMEDIATE = 64
POSITIONS = 64


def tiny_weights(seed: int = 0, *, prefix: str = "") -> dict[str, NDArray[np.float32]]:
    rng = np.random.default_rng(seed)

    def normal(*shape: int, scale: float = 0.2) -> NDArray[np.float32]:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    weights = {
        "embeddings.word_embeddings.weight": normal(VOCAB, HIDDEN),
        "embeddings.position_embeddings.weight": normal(POSITIONS, HIDDEN),
        "embeddings.token_type_embeddings.weight": normal(2, HIDDEN),
        "embeddings.LayerNorm.weight": 1 + normal(HIDDEN, scale=0.1),
        "embeddings.LayerNorm.bias": normal(HIDDEN, scale=0.1),
    }
    for layer in range(LAYERS):
        p = f"encoder.layer.{layer}"
        for name in ("query", "key", "value"):
            weights[f"{p}.attention.self.{name}.weight"] = normal(HIDDEN, HIDDEN)
            weights[f"{p}.attention.self.{name}.bias"] = normal(HIDDEN, scale=0.1)
        shapes = {
            "attention.output.dense": (HIDDEN, HIDDEN),
            "intermediate.dense": (INTERMEDIATE, HIDDEN),
            "output.dense": (HIDDEN, INTERMEDIATE),
        }
        for name, (out, inp) in shapes.items():
            weights[f"{p}.{name}.weight"] = normal(out, inp)
            weights[f"{p}.{name}.bias"] = normal(out, scale=0.1)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            weights[f"{p}.{norm}.weight"] = 1 + normal(HIDDEN, scale=0.1)
            weights[f"{p}.{norm}.bias"] = normal(HIDDEN, scale=0.1)
    return {prefix + k: v for k, v in weights.items()}


def write_tiny_model(
    directory: Path,
    tokenizer_json: Path,
    *,
    pooling: str = "mean",
    architecture: str = "BertModel",
    prefix: str = "",
    max_seq_length: int = 48,
) -> Path:
    from safetensors.numpy import save_file

    directory.mkdir(parents=True, exist_ok=True)
    save_file(tiny_weights(prefix=prefix), str(directory / "model.safetensors"))
    shutil.copyfile(tokenizer_json, directory / "tokenizer.json")
    config = {
        "architectures": [architecture],
        "model_type": "bert",
        "vocab_size": VOCAB,
        "hidden_size": HIDDEN,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "intermediate_size": INTERMEDIATE,
        "max_position_embeddings": POSITIONS,
        "type_vocab_size": 2,
        "layer_norm_eps": 1e-12,
        "hidden_act": "gelu",
    }
    (directory / "config.json").write_text(json.dumps(config))
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {
            "idx": 1,
            "name": "1",
            "path": "1_Pooling",
            "type": "sentence_transformers.models.Pooling",
        },
        {
            "idx": 2,
            "name": "2",
            "path": "2_Normalize",
            "type": "sentence_transformers.models.Normalize",
        },
    ]
    (directory / "modules.json").write_text(json.dumps(modules))
    (directory / "1_Pooling").mkdir(exist_ok=True)
    (directory / "1_Pooling" / "config.json").write_text(
        json.dumps(
            {
                "word_embedding_dimension": HIDDEN,
                "pooling_mode_cls_token": pooling == "cls",
                "pooling_mode_mean_tokens": pooling == "mean",
                "pooling_mode_max_tokens": pooling == "max",
            }
        )
    )
    (directory / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": max_seq_length, "do_lower_case": False})
    )
    return directory
