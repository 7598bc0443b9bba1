"""The ``connect-json`` encoding: our output events in Kafka Connect's JSON envelope.

Apache Kafka's ``JsonConverter`` with ``schemas.enable=true`` reads a record value as
``{"schema": <Connect schema>, "payload": <value>}``; with it, stock sinks that need a schema
(Debezium's JDBC sink, Confluent's) write our events into tables without custom code. The
Connect schema is derived here from the event Structs of :mod:`worker.wire.events`, the same
source ``schemas/`` is generated from, by these rules:

- ``str``/``int``/``float``/``bool`` → ``string``/``int64``/``double``/``boolean``; a type that
  admits ``None`` → an optional field;
- a nested Struct (``source``) → a Connect ``struct``, which the stock ``Flatten`` transform
  turns into columns (``source_topic``, ...);
- a date-time → ``int64`` named ``org.apache.kafka.connect.data.Timestamp`` (milliseconds since
  the epoch: Connect's timestamps carry no finer unit);
- the embedding → an ``array`` of ``double`` named ``io.debezium.data.DoubleVector``, which
  Debezium's JDBC sink binds as pgvector's ``vector``. Its ``FloatVector`` name binds as
  ``halfvec`` (16-bit floats) instead, which would round the model's 32-bit values; every
  float32 is exact as a float64, so nothing is lost;
- other bytes → ``bytes`` (base64 in JSON, as the converter expects);
- a list of strings or numbers → an ``array``; anything else nested (metadata, spans, a dead
  letter's headers) → a ``string`` named ``io.debezium.data.Json`` holding its JSON text, which
  the JDBC sink writes into a ``json``/``jsonb`` column.

Keys stay plain UTF-8 strings (read them with Connect's ``StringConverter``); tombstones stay
null values. Only output events have this encoding: input documents are msgpack or JSON.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
import msgspec.inspect as mi
import numpy as np

from worker.wire.events import CONNECT_VECTOR, SCHEMA_VERSION

T = TypeVar("T", bound=msgspec.Struct)

TIMESTAMP_NAME = "org.apache.kafka.connect.data.Timestamp"
JSON_NAME = "io.debezium.data.Json"
VECTOR_NAME = "io.debezium.data.DoubleVector"
SCHEMA_NAME_PREFIX = "chunkstream."

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MILLISECOND = dt.timedelta(milliseconds=1)
_json_text = msgspec.json.Encoder()
_PRIMITIVES: dict[type[mi.Type], str] = {
    mi.StrType: "string",
    mi.IntType: "int64",
    mi.FloatType: "double",
    mi.BoolType: "boolean",
}

Convert = Callable[[Any], Any]


class _Field(msgspec.Struct, frozen=True):
    schema: dict[str, Any]
    to_payload: Convert | None  # None: the value is written as it is
    from_payload: Convert | None


def _timestamp_to_millis(value: dt.datetime) -> int:
    return (value - _EPOCH) // _MILLISECOND


def _millis_to_timestamp(value: int) -> dt.datetime:
    return _EPOCH + value * _MILLISECOND


def _vector_to_floats(value: bytes) -> list[float]:
    floats: list[float] = np.frombuffer(value, dtype="<f4").tolist()
    return floats


def _floats_to_vector(value: list[float]) -> bytes:
    return np.asarray(value, dtype="<f4").tobytes()


def _to_json_text(value: Any) -> str:
    return _json_text.encode(value).decode()


def _from_json_text(value: str) -> Any:
    return msgspec.json.decode(value)


def _optional_inner(t: mi.Type) -> tuple[mi.Type, bool]:
    """The type under ``X | None`` and whether ``None`` is allowed."""
    if isinstance(t, mi.UnionType):
        others = [member for member in t.types if not isinstance(member, mi.NoneType)]
        if len(others) == 1:
            return others[0], len(others) < len(t.types)
        raise TypeError(f"no Connect schema for the union {t!r}")
    return t, False


def _field(t: mi.Type) -> _Field:
    if isinstance(t, mi.Metadata):
        extra = t.extra or {}
        if extra.get(CONNECT_VECTOR) and isinstance(t.type, mi.BytesType):
            schema = {
                "type": "array",
                "items": {"type": "double", "optional": False},
                "name": VECTOR_NAME,
                "version": 1,
            }
            return _Field(schema, _vector_to_floats, _floats_to_vector)
        t = t.type
    kind = _PRIMITIVES.get(type(t))
    if kind is not None:
        return _Field({"type": kind}, None, None)
    if isinstance(t, mi.DateTimeType):
        schema = {"type": "int64", "name": TIMESTAMP_NAME, "version": 1}
        return _Field(schema, _timestamp_to_millis, _millis_to_timestamp)
    if isinstance(t, mi.BytesType):
        return _Field({"type": "bytes"}, None, None)
    if isinstance(t, mi.StructType) and not t.array_like:
        return _Field(_struct_schema(t), None, None)
    if isinstance(t, mi.ListType) and type(t.item_type) in _PRIMITIVES:
        item = {"type": _PRIMITIVES[type(t.item_type)], "optional": False}
        return _Field({"type": "array", "items": item}, None, None)
    # Maps of any values, lists of structs: a column of JSON text.
    return _Field(
        {"type": "string", "name": JSON_NAME, "version": 1}, _to_json_text, _from_json_text
    )


def _struct_fields(t: mi.StructType) -> list[tuple[str, _Field, bool]]:
    fields = []
    for f in t.fields:
        inner, optional = _optional_inner(f.type)
        fields.append((f.encode_name, _field(inner), optional))
    return fields


def _struct_schema(t: mi.StructType) -> dict[str, Any]:
    nested = []
    for name, field, optional in _struct_fields(t):
        if field.to_payload is not None:
            # A nested struct's values are written as they are; a converted one is not yet needed.
            raise TypeError(f"no Connect schema for {t.cls.__name__}.{name} inside a struct")
        nested.append({**field.schema, "optional": optional, "field": name})
    return {"type": "struct", "fields": nested, "name": SCHEMA_NAME_PREFIX + t.cls.__name__}


def connect_schema(event_type: type[msgspec.Struct]) -> dict[str, Any]:
    """The Connect schema (JsonConverter's JSON form) of one event type's records."""
    info = mi.type_info(event_type)
    assert isinstance(info, mi.StructType)
    fields = [
        {**field.schema, "optional": optional, "field": name}
        for name, field, optional in _struct_fields(info)
    ]
    return {
        "type": "struct",
        "fields": fields,
        "optional": False,
        "name": SCHEMA_NAME_PREFIX + event_type.__name__,
        "version": SCHEMA_VERSION,
    }


class ConnectJsonEncoder:
    """Encodes events of one type as ``{"schema": ..., "payload": ...}``; the schema part is
    the same bytes on every record, encoded once."""

    def __init__(self, event_type: type[msgspec.Struct]) -> None:
        self.event_type = event_type
        info = mi.type_info(event_type)
        assert isinstance(info, mi.StructType)
        self._fields = [
            (f.name, f.encode_name, field.to_payload)
            for f, (_, field, _) in zip(info.fields, _struct_fields(info), strict=True)
        ]
        schema = msgspec.json.encode(connect_schema(event_type))
        self._prefix = b'{"schema":' + schema + b',"payload":'
        self._encode = msgspec.json.Encoder().encode

    def encode(self, event: msgspec.Struct) -> bytes:
        if type(event) is not self.event_type:
            raise TypeError(f"expected {self.event_type.__name__}, got {type(event).__name__}")
        payload = {}
        for attribute, name, convert in self._fields:
            value = getattr(event, attribute)
            payload[name] = value if convert is None or value is None else convert(value)
        return self._prefix + self._encode(payload) + b"}"


def decode_connect(value: bytes, event_type: type[T]) -> T:
    """An event back from its ``connect-json`` bytes (the schema part is not checked: a reader
    of our own events trusts the type it asked for). Timestamps come back at millisecond
    precision, the envelope's own."""
    envelope = msgspec.json.decode(value)
    if not isinstance(envelope, dict) or not isinstance(envelope.get("payload"), dict):
        raise msgspec.ValidationError("expected a Connect envelope: an object with a `payload`")
    payload: dict[str, Any] = envelope["payload"]
    info = mi.type_info(event_type)
    assert isinstance(info, mi.StructType)
    for name, field, _ in _struct_fields(info):
        raw = payload.get(name)
        if raw is not None and field.from_payload is not None:
            payload[name] = field.from_payload(raw)
    return msgspec.convert(payload, event_type)
