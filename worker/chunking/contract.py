"""What a strategy is, what building one may use, and what can go wrong: the contract between
the registry and the strategies. Below both of them, so neither imports the other to learn it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, runtime_checkable

import msgspec

from worker.chunking.types import Chunker

if TYPE_CHECKING:
    from worker.models.reference import ModelRef

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
    """The models a factory may need, each resolved once per process
    (:func:`worker.inference.serving.resolve`): ``boundary`` places the embedding strategies'
    cuts and its identity is part of their fingerprint (another model moves boundaries, so it
    must mint new ids); ``retrieval`` is the model that embeds the chunks downstream, whose
    tokens size them. ``None`` for a role nobody resolved (a library caller with its own
    embedder)."""

    boundary: ModelRef | None = None
    retrieval: ModelRef | None = None


@runtime_checkable
class Resolving(Protocol):
    """A chunker that says what its unset parameters came to in its unit (a cap of the model's
    window, a size in tokens or characters): the effective defaults ``chunkstream chunk
    --help`` prints. Every built-in chunker is one."""

    @property
    def resolved(self) -> msgspec.Struct: ...


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
