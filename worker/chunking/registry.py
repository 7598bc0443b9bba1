"""Strategy names → factories. The worker and the CLI build chunkers only through here.

Parameters arrive as loose mappings (strings from env/flags, scalars from events). Each
strategy declares a msgspec Struct of its parameters; :func:`build` converts the mapping into
it (string → number coercion allowed, unknown names refused) so a bad parameter fails with a
message that names it, before any document is touched.

The registry imports the built-in strategies (:mod:`worker.chunking.strategies`); they import
only the contract (:mod:`worker.chunking.contract`), never the registry: no import circle.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from worker.chunking.contract import (
    BuildContext,
    InvalidParameters,
    NoSuchStrategy,
    Strategy,
    StrategyError,
)
from worker.chunking.strategies import BUILTIN
from worker.chunking.types import Chunker

__all__ = [
    "BuildContext",
    "BuiltStrategy",
    "InvalidParameters",
    "NoSuchStrategy",
    "Strategy",
    "StrategyError",
    "build",
    "fingerprint",
    "get",
    "names",
]

_REGISTRY: dict[str, Strategy[Any]] = {s.name: s for s in BUILTIN}


def names() -> list[str]:
    return sorted(_REGISTRY)


def get(name: str) -> Strategy[Any]:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise NoSuchStrategy(
            f"unknown strategy {name!r}; known: {', '.join(sorted(_REGISTRY))}"
        ) from None


@dataclass(frozen=True)
class BuiltStrategy:
    """A configured chunker plus the fingerprint that goes into chunk ids."""

    name: str
    chunker: Chunker
    needs_model: bool
    fingerprint: str


def build(
    name: str, params: Mapping[str, Any] | None = None, context: BuildContext | None = None
) -> BuiltStrategy:
    strategy = get(name)
    parsed = strategy.parse_params(params or {})
    context = context or BuildContext()
    try:
        chunker = strategy.factory(parsed, context)
    except (ValueError, TypeError) as exc:
        raise InvalidParameters(f"strategy {name!r}: {exc}") from exc
    return BuiltStrategy(
        name=name,
        chunker=chunker,
        needs_model=strategy.needs_model,
        fingerprint=fingerprint(name, parsed, _models_of(strategy, parsed, context)),
    )


def _models_of(
    strategy: Strategy[Any], params: msgspec.Struct, context: BuildContext
) -> str | None:
    """What of the models the chunks depend on: the boundary model that places an embedding
    strategy's cuts, and the retrieval model's tokenizer and window when the strategy sizes
    chunks in its tokens (its ``tokenizer`` parameter unset). None when neither."""
    parts = []
    if strategy.needs_model and context.boundary is not None:
        parts.append(context.boundary.identity)
    sized_by_retrieval = getattr(params, "tokenizer", "") is None
    if sized_by_retrieval and context.retrieval is not None:
        parts.append(f"tokens:{context.retrieval.sizing_identity}")
    return "+".join(parts) or None


def fingerprint(name: str, params: msgspec.Struct, model_id: str | None = None) -> str:
    """Stable digest of a strategy, its effective parameters (defaults included) and, for
    embedding strategies, the boundary model's identity."""
    parts: list[object] = [name, msgspec.to_builtins(params)]
    if model_id is not None:
        parts.append(model_id)
    canonical = msgspec.json.encode(parts, order="sorted")
    return hashlib.sha256(canonical).hexdigest()[:16]
