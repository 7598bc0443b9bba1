"""Why a document could not be chunked, as stable short codes.

Every failure that is the *input's* fault maps to one :class:`DocumentError` subclass; its
``kind`` is the dead-letter event's ``error_kind`` and a metrics label, so the set is closed
and the strings never change once published. The subclasses are the list: docs/reference/
events.md's table of dead letters names each one (tests/architecture/test_reference_docs.py).
"""

from __future__ import annotations

from typing import ClassVar


class DocumentError(Exception):
    """A document that can never be chunked as sent; it goes to the dead-letter topic."""

    kind: ClassVar[str] = "invalid_document"


class Undecodable(DocumentError):
    kind = "undecodable"


class InvalidUtf8(DocumentError):
    kind = "invalid_utf8"


class SchemaViolation(DocumentError):
    kind = "schema_violation"


class DocumentTooLarge(DocumentError):
    kind = "document_too_large"


class HeadersTooLarge(DocumentError):
    kind = "headers_too_large"


class UnknownStrategy(DocumentError):
    kind = "unknown_strategy"


class StrategyNotAllowed(DocumentError):
    kind = "strategy_not_allowed"


class InvalidStrategyParams(DocumentError):
    kind = "invalid_strategy_params"


class ChunkingFailed(DocumentError):
    """The strategy raised on this input: a bug of ours, isolated to the one document."""

    kind = "chunking_failed"


class OutputRecordTooLarge(DocumentError):
    """A chunk event is larger than the output topic accepts."""

    kind = "output_record_too_large"


class TooManyChunks(DocumentError):
    """The document would fan out into more chunk events than the configured limit: every
    chunk carries the document's metadata, so output could otherwise dwarf the input."""

    kind = "too_many_chunks"


class KeyMismatch(DocumentError):
    """A keyed record whose document id differs from its key: the key is a changelog's
    identity (a tombstone under it must delete this document), so the two must agree."""

    kind = "key_mismatch"


class UnavailableValue(DocumentError):
    """A mapped column of a table row holds the placeholder of a value its change event did not
    carry (an unchanged TOASTed column): chunking the placeholder would retract the real
    chunks (worker.wire.rows)."""

    kind = "unavailable_value"


class UnkeyedTombstone(DocumentError):
    """A null value without a key: a tombstone must say which document it deletes."""

    kind = "unkeyed_tombstone"


class ConfigError(ValueError):
    """A setting is invalid; the message names the setting. Raised at start-up (and, as
    worker.kafka.permissions.PermissionRefused, when the broker's ACLs refuse the worker)."""


class CommandError(Exception):
    """An expected failure of a command: the CLI prints the message as one line and exits 1.

    The message says what to do (the command that builds the model, the extra to install)."""


class ModelNotBuilt(CommandError):
    """The model directory holds no built model."""


class ExtraMissing(CommandError):
    """An optional dependency group (a pip extra) is not installed."""


class InputUnreadable(CommandError):
    """An input file is missing, unreadable, or not UTF-8."""
