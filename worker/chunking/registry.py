"""Strategy names → factories. The worker and the CLI build chunkers only through here.

Parameters arrive as loose mappings (strings from env/flags, scalars from events). Each
strategy declares a msgspec Struct of its parameters; :func:`build` converts the mapping into
it (string → number coercion allowed, unknown names refused) so a bad parameter fails with a
message that names it, before any document is touched.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import msgspec

from worker.chunking.types import Chunker

P = TypeVar("P", bound=msgspec.Struct)


class StrategyError(ValueError):
    """A strategy name or its parameters are not acceptable."""


class NoSuchStrategy(StrategyError):
    """No strategy is registered under the name (the document-side twin is
    :class:`worker.errors.UnknownStrategy`, the dead-letter kind)."""


class InvalidParameters(StrategyError):
    """A parameter is unknown or its value is refused; the message names it."""


@dataclass(frozen=True)
class BuildContext:
    """Resources a factory may need that are not parameters (shared, built once per process)."""

    model_dir: str | None = None
    # Identity of the embedding model and variant (the manifest's `identity`, not a digest of the
    # ONNX bytes: worker/embedding/identity.py). Part of the fingerprint of
    # strategies that need a model: another model moves boundaries, so it must mint new ids.
    model_id: str | None = None


@dataclass(frozen=True)
class Strategy(Generic[P]):
    name: str
    params_type: type[P]
    factory: Callable[[P, BuildContext], Chunker]
    needs_model: bool
    summary: str

    def parse_params(self, params: Mapping[str, Any]) -> P:
        try:
            return msgspec.convert(dict(params), self.params_type, strict=False)
        except msgspec.ValidationError as exc:
            raise InvalidParameters(f"strategy {self.name!r}: {exc}") from exc


_REGISTRY: dict[str, Strategy[Any]] = {}


def register(strategy: Strategy[Any]) -> Strategy[Any]:
    if strategy.name in _REGISTRY:
        raise ValueError(f"strategy {strategy.name!r} registered twice")
    _REGISTRY[strategy.name] = strategy
    return strategy


def _load_builtin() -> None:
    # Importing the strategy modules registers them; done lazily so that importing the
    # registry alone stays cheap and free of import cycles.
    from worker.chunking import strategies  # noqa: F401


def names() -> list[str]:
    _load_builtin()
    return sorted(_REGISTRY)


def get(name: str) -> Strategy[Any]:
    _load_builtin()
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
        fingerprint=fingerprint(name, parsed, context.model_id if strategy.needs_model else None),
    )


def fingerprint(name: str, params: msgspec.Struct, model_id: str | None = None) -> str:
    """Stable digest of a strategy, its effective parameters (defaults included) and, for
    embedding strategies, the model."""
    parts: list[object] = [name, msgspec.to_builtins(params)]
    if model_id is not None:
        parts.append(model_id)
    canonical = msgspec.json.encode(parts, order="sorted")
    return hashlib.sha256(canonical).hexdigest()[:16]
