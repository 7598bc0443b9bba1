"""Bytes ↔ events. One reusable encoder per format, one typed decoder per format and type.

Every produced record carries a ``content-type`` header. The decoder trusts the header when
present and sniffs the first byte when it is missing, so producers that do not set headers
(kcat, most quick scripts) still work.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, TypeVar

import msgspec

from worker.errors import (
    DocumentTooLarge,
    HeadersTooLarge,
    InvalidUtf8,
    SchemaViolation,
    Undecodable,
)
from worker.wire.connect_json import ConnectJsonEncoder, decode_connect
from worker.wire.events import DocumentEvent

Encoding = Literal["msgpack", "json", "connect-json"]
# What documents may come in as (connect-json is an output encoding: worker.wire.connect_json).
DocumentEncoding = Literal["msgpack", "json"]
Headers = Sequence[tuple[str, bytes | None]]

CONTENT_TYPE_HEADER = "content-type"
# On a chunk tombstone: which document it belonged to (a null value says nothing), for sinks
# that want to know (a stock sink needs only the key).
DOC_ID_HEADER = "chunkstream-doc-id"
CONTENT_TYPES: dict[Encoding, str] = {
    "msgpack": "application/msgpack",
    "json": "application/json",
    # JSON in Kafka Connect's schema envelope; a vendor type of ours, as no registered media
    # type names that envelope. Connect's converters ignore it; our readers unwrap by it.
    "connect-json": "application/vnd.chunkstream.connect+json",
}
_CONTENT_TYPE_ALIASES: dict[str, Encoding] = {
    "application/msgpack": "msgpack",
    "application/x-msgpack": "msgpack",
    "application/vnd.msgpack": "msgpack",
    "application/json": "json",
    "text/json": "json",
    "application/vnd.chunkstream.connect+json": "connect-json",
}
MAX_HEADERS = 64
MAX_HEADER_BYTES = 64 * 1024

T = TypeVar("T", bound=msgspec.Struct)


class EventEncoder:
    """Encodes any of our events in one format; reuses its internal buffer between calls."""

    def __init__(self, encoding: Encoding) -> None:
        self.encoding: Encoding = encoding
        self.content_type = CONTENT_TYPES[encoding]
        self._encoder: msgspec.msgpack.Encoder | msgspec.json.Encoder = (
            msgspec.msgpack.Encoder() if encoding == "msgpack" else msgspec.json.Encoder()
        )
        self._connect: dict[type[msgspec.Struct], ConnectJsonEncoder] = {}

    def encode(self, event: msgspec.Struct) -> bytes:
        if self.encoding != "connect-json":
            return self._encoder.encode(event)
        encoder = self._connect.get(type(event))
        if encoder is None:
            encoder = self._connect[type(event)] = ConnectJsonEncoder(type(event))
        return encoder.encode(event)

    def headers(self) -> list[tuple[str, bytes]]:
        return [(CONTENT_TYPE_HEADER, self.content_type.encode())]


def sniff(value: bytes) -> Encoding | None:
    """Guess the format of an event whose producer set no content-type header.

    Every event is an object: JSON starts with ``{`` (after optional whitespace); msgpack
    starts with a map marker (fixmap 0x80-0x8f, map16 0xde, map32 0xdf).
    """
    stripped = value.lstrip(b" \t\r\n")
    if not stripped:
        return None
    first = stripped[0]
    if first == ord("{"):
        return "json"
    if 0x80 <= value[0] <= 0x8F or value[0] in (0xDE, 0xDF):
        return "msgpack"
    return None


def encoding_from_headers(headers: Headers) -> Encoding | None:
    for key, raw in headers:
        if key.lower() != CONTENT_TYPE_HEADER or raw is None:
            continue
        media_type = raw.decode("latin-1").split(";", 1)[0].strip().lower()
        try:
            return _CONTENT_TYPE_ALIASES[media_type]
        except KeyError:
            raise Undecodable(f"unsupported content-type header {media_type!r}") from None
    return None


def check_headers(headers: Headers) -> None:
    if len(headers) > MAX_HEADERS:
        raise HeadersTooLarge(f"{len(headers)} headers (limit {MAX_HEADERS})")
    total = sum(len(k) + len(v or b"") for k, v in headers)
    if total > MAX_HEADER_BYTES:
        raise HeadersTooLarge(f"headers total {total} bytes (limit {MAX_HEADER_BYTES})")


def decode_as(value: bytes | None, headers: Headers, event_type: type[T]) -> T:
    """Decode one record value into ``event_type``; every failure is a :class:`DocumentError`."""
    if not value:
        raise Undecodable("empty record value (a tombstone or an empty message)")
    encoding = encoding_from_headers(headers) or sniff(value)
    if encoding is None:
        raise Undecodable("no content-type header and the value is neither JSON nor msgpack")
    try:
        if encoding == "json":
            return msgspec.json.decode(value, type=event_type)
        if encoding == "connect-json":
            return decode_connect(value, event_type)
        return msgspec.msgpack.decode(value, type=event_type)
    except msgspec.ValidationError as exc:
        raise SchemaViolation(str(exc)) from None
    except msgspec.DecodeError as exc:
        if "UTF-8" in str(exc):
            raise InvalidUtf8(f"{encoding}: {exc}") from None
        raise Undecodable(f"{encoding}: {exc}") from None


def decode_document(value: bytes | None, headers: Headers, *, max_bytes: int) -> DocumentEvent:
    """Decode and validate an input record. Limits are checked before any parsing work."""
    check_headers(headers)
    if value is not None and len(value) > max_bytes:
        raise DocumentTooLarge(f"record value is {len(value)} bytes (limit {max_bytes})")
    if encoding_from_headers(headers) == "connect-json":
        raise Undecodable("connect-json is an output encoding; send documents as msgpack or JSON")
    doc = decode_as(value, headers, DocumentEvent)
    if not doc.id.strip():
        raise SchemaViolation("`id` is blank - at `$.id`")
    return doc
