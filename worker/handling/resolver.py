"""Which configured chunker handles a document: the default, or its allowed override."""

from __future__ import annotations

from collections import OrderedDict

import msgspec

from worker.chunking import registry
from worker.errors import InvalidStrategyParams, StrategyNotAllowed, UnknownStrategy
from worker.wire.events import DocumentEvent

# Overrides are built once per distinct (name, params) and kept in a small LRU: building can
# be costly (tokenizer load) and documents of one source tend to share their override.
_OVERRIDE_CACHE_SIZE = 64
# Parameters whose value is a file path. A document may only name the values the operator
# configured (and "character"): otherwise anyone who can write to the input topic could make
# the worker open any file on its disk, and probe which exist through the dead letters.
PATH_PARAMS = frozenset({"tokenizer", "embedding_model"})


class StrategyResolver:
    def __init__(
        self,
        default: registry.BuiltStrategy,
        allowed: frozenset[str],
        context: registry.BuildContext,
        trusted_paths: frozenset[str] = frozenset(),
    ) -> None:
        self.default = default
        self.allowed = allowed
        self.context = context
        self.trusted_paths = trusted_paths | {"character"}
        self._cache: OrderedDict[bytes, registry.BuiltStrategy] = OrderedDict()

    def allows(self, name: str) -> bool:
        return "*" in self.allowed or name in self.allowed

    def resolve(self, doc: DocumentEvent) -> registry.BuiltStrategy:
        override = doc.strategy
        if override is None:
            return self.default
        # An unknown name is reported as such even when overrides are refused: it is the
        # more useful reason for whoever fixes the producer.
        if override.name not in registry.names():
            raise UnknownStrategy(
                f"unknown strategy {override.name!r}; known: {', '.join(registry.names())}"
            )
        if not self.allows(override.name):
            raise StrategyNotAllowed(
                f"document asks for strategy {override.name!r}; allowed overrides: "
                f"{', '.join(sorted(self.allowed)) or 'none'}"
            )
        for name in sorted(PATH_PARAMS & override.params.keys()):
            if override.params[name] not in self.trusted_paths:
                raise StrategyNotAllowed(
                    f"a document may not set {name!r} to a path the worker was not configured "
                    "with (CHUNKSTREAM_STRATEGY_PARAMS or CHUNKSTREAM_MODEL_DIR)"
                )
        key = msgspec.msgpack.encode([override.name, sorted(override.params.items())])
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        try:
            built = registry.build(override.name, override.params, self.context)
        except registry.NoSuchStrategy as exc:
            raise UnknownStrategy(str(exc)) from None
        except registry.StrategyError as exc:
            raise InvalidStrategyParams(str(exc)) from None
        if built.needs_model and self.context.boundary is None:
            raise StrategyNotAllowed(
                f"strategy {override.name!r} needs the embedding model, which this worker "
                "was not configured to load (set CHUNKSTREAM_MODEL_DIR)"
            )
        self._cache[key] = built
        if len(self._cache) > _OVERRIDE_CACHE_SIZE:
            self._cache.popitem(last=False)
        return built
