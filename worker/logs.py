"""Structured JSON logs: one object per line, with the document's coordinates when known."""

from __future__ import annotations

import datetime as dt
import logging
import sys
from typing import Any

import msgspec

_STANDARD = frozenset(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}
# Anything a caller passes in `extra=` that JSON cannot hold is logged as its repr.
_encoder = msgspec.json.Encoder(enc_hook=repr)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        # Fields passed with `extra=` (doc_id, partition, offset, …) become top-level keys.
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return _encoder.encode(entry).decode("utf-8", errors="replace")


def configure(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # aiokafka logs every reconnect attempt at INFO/ERROR; keep its noise at WARNING unless
    # the operator asked for DEBUG.
    logging.getLogger("aiokafka").setLevel("DEBUG" if level == "DEBUG" else "WARNING")
