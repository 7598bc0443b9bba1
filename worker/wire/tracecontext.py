"""W3C Trace Context across the worker, and the input headers allowed to travel with it.

Invariants:
- A document whose record carries a valid ``traceparent`` header has every one of its chunk
  events and its dead letter carry ``traceparent`` with the *same trace id*, version ``00``,
  the worker's own span id (one per document: the span "chunk this document", random, never
  zero) and the sender's sampled/random flags; ``tracestate`` continues unchanged with it.
- An invalid ``traceparent`` (W3C: wrong length or layout, upper-case or non-hex digits,
  version ``ff``, an all-zero id, two ``traceparent`` headers) is ignored, and so is
  ``tracestate`` then, as the spec requires; no trace is started without one (no tracing SDK
  runs here: a new trace would have no root anyone records).
- No other input header is copied unless ``CHUNKSTREAM_FORWARD_HEADERS`` names it (names match
  case-insensitively; several headers of one allowed name all travel, in order).

Pure functions of the input headers; the span id comes from an injectable source for tests.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from worker.wire.codec import Headers

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
_VERSION_00_LEN = 55
_HEX = re.compile(r"[0-9a-f]+")
# Level 1 defines `sampled` (0x01), level 2 adds `random` (0x02); other bits are not ours to
# pass on under version 00.
_KNOWN_FLAGS = 0x03
# tracestate list members (W3C): a simple or multi-tenant key, a value of printable ASCII
# without "," and "=", at most 32 members.
_TRACESTATE_MEMBER = re.compile(
    r"(?:[a-z][_0-9a-z\-*/]{0,255}|[a-z0-9][_0-9a-z\-*/]{0,240}@[a-z][_0-9a-z\-*/]{0,13})"
    r"=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]"
)
_MAX_TRACESTATE_MEMBERS = 32


@dataclass(frozen=True, slots=True)
class TraceParent:
    trace_id: str  # 32 lower-case hex digits, not all zero
    parent_id: str  # 16 lower-case hex digits, not all zero
    flags: int

    def child(self, span_id: int) -> str:
        """The ``traceparent`` value of a span of ours under this one (version 00)."""
        return f"00-{self.trace_id}-{span_id:016x}-{self.flags & _KNOWN_FLAGS:02x}"


def parse_traceparent(value: str) -> TraceParent | None:
    """A ``traceparent`` value per W3C Trace Context, or None when it is invalid.

    Versions above 00 are read as 00 when their first 55 characters have its layout and
    anything after them starts with "-" (the spec's rule for future versions)."""
    if len(value) < _VERSION_00_LEN:
        return None
    version = value[:2]
    if not _is_hex(version) or version == "ff":
        return None
    if len(value) > _VERSION_00_LEN and (version == "00" or value[_VERSION_00_LEN] != "-"):
        return None
    head = value[:_VERSION_00_LEN]
    if head[2] != "-" or head[35] != "-" or head[52] != "-":
        return None
    trace_id, parent_id, flags = head[3:35], head[36:52], head[53:55]
    if not (_is_hex(trace_id) and _is_hex(parent_id) and _is_hex(flags)):
        return None
    if trace_id == "0" * 32 or parent_id == "0" * 16:
        return None
    return TraceParent(trace_id, parent_id, int(flags, 16))


def valid_tracestate(value: str) -> bool:
    members = [m.strip() for m in value.split(",")]
    members = [m for m in members if m]  # empty members are allowed and carry nothing
    return len(members) <= _MAX_TRACESTATE_MEMBERS and all(
        _TRACESTATE_MEMBER.fullmatch(m) for m in members
    )


def _is_hex(text: str) -> bool:
    return _HEX.fullmatch(text) is not None


def _random_span_id() -> int:
    span = 0
    while span == 0:  # all-zero ids are invalid
        span = random.getrandbits(64)
    return span


class HeaderPropagation:
    """What a document's input headers contribute to the headers of its output records."""

    def __init__(
        self,
        forward: Iterable[str] = (),
        span_ids: Callable[[], int] = _random_span_id,
    ) -> None:
        self._forward = frozenset(name.lower() for name in forward)
        self._span_ids = span_ids

    def outgoing(self, headers: Headers) -> list[tuple[str, bytes]]:
        """Headers to add to every record published for the document with ``headers``."""
        parents: list[bytes | None] = []
        states: list[bytes] = []
        forwarded: list[tuple[str, bytes]] = []
        for key, value in headers:
            name = key.lower()
            if name == TRACEPARENT:
                parents.append(value)
            elif name == TRACESTATE:
                if value:
                    states.append(value)
            elif name in self._forward and value is not None:
                forwarded.append((key, value))
        out: list[tuple[str, bytes]] = []
        parent = _one_traceparent(parents)
        if parent is not None:
            out.append((TRACEPARENT, parent.child(self._span_ids()).encode("ascii")))
            # Several tracestate headers are one list, joined in order (as HTTP combines them).
            state = b",".join(states).decode("ascii", "replace")
            if state and valid_tracestate(state):
                out.append((TRACESTATE, state.encode("ascii")))
        return out + forwarded


def _one_traceparent(values: list[bytes | None]) -> TraceParent | None:
    if len(values) != 1 or values[0] is None:
        return None  # none, or several: the spec treats several as invalid
    try:
        text = values[0].decode("ascii")
    except UnicodeDecodeError:
        return None
    return parse_traceparent(text)
