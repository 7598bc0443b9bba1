"""W3C Trace Context parsing and header propagation (the real-broker half is in
tests/interop/test_confluent_interop.py)."""

from __future__ import annotations

import pytest

from worker.wire.tracecontext import HeaderPropagation, parse_traceparent, valid_tracestate

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
VALID = f"00-{TRACE}-{PARENT}-01"


def test_a_valid_traceparent_is_parsed() -> None:
    parsed = parse_traceparent(VALID)
    assert parsed is not None
    assert (parsed.trace_id, parsed.parent_id, parsed.flags) == (TRACE, PARENT, 1)


@pytest.mark.parametrize(
    "value",
    [
        "",
        VALID[:-1],  # too short
        VALID + "-00",  # version 00 is exactly 55 characters
        f"00-{TRACE.upper()}-{PARENT}-01",  # upper-case hex
        f"00-{TRACE}-{PARENT}-0g",  # not hex
        f"ff-{TRACE}-{PARENT}-01",  # version ff is invalid
        f"00-{'0' * 32}-{PARENT}-01",  # all-zero trace id
        f"00-{TRACE}-{'0' * 16}-01",  # all-zero parent id
        f"00_{TRACE}-{PARENT}-01",  # layout
        f"01-{TRACE}-{PARENT}-01x",  # a future version must go on with "-"
    ],
)
def test_invalid_traceparents_are_refused(value: str) -> None:
    assert parse_traceparent(value) is None


def test_a_future_version_is_read_as_version_00() -> None:
    parsed = parse_traceparent(f"cc-{TRACE}-{PARENT}-01-what-comes-next")
    assert parsed is not None
    assert parsed.trace_id == TRACE


def test_tracestate_validation() -> None:
    assert valid_tracestate("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")
    assert valid_tracestate("tenant@vendor=x, ,other=1")
    assert not valid_tracestate("Upper=1")
    assert not valid_tracestate("k=has,comma=")
    assert not valid_tracestate(",".join(f"k{i}=v" for i in range(33)))


def test_trace_context_continues_with_the_workers_span_and_nothing_else_travels() -> None:
    propagation = HeaderPropagation(span_ids=lambda: 0xABC)
    out = propagation.outgoing(
        [
            ("Traceparent", VALID.encode()),
            ("tracestate", b"rojo=1"),
            ("tracestate", b"congo=2"),
            ("tenant", b"acme"),
            ("content-type", b"application/json"),
        ]
    )
    assert out == [
        ("traceparent", f"00-{TRACE}-0000000000000abc-01".encode()),
        ("tracestate", b"rojo=1,congo=2"),
    ]


def test_flags_beyond_sampled_and_random_are_not_passed_on() -> None:
    out = HeaderPropagation(span_ids=lambda: 1).outgoing(
        [("traceparent", f"00-{TRACE}-{PARENT}-ff".encode())]
    )
    assert out == [("traceparent", f"00-{TRACE}-0000000000000001-03".encode())]


@pytest.mark.parametrize(
    "headers",
    [
        [("traceparent", b"garbage"), ("tracestate", b"rojo=1")],
        [("traceparent", VALID.encode()), ("traceparent", VALID.encode())],
        [("traceparent", None)],
        [("traceparent", "00-é".encode())],
        [("tracestate", b"rojo=1")],
    ],
)
def test_without_one_valid_traceparent_no_trace_context_travels(
    headers: list[tuple[str, bytes | None]],
) -> None:
    assert HeaderPropagation(span_ids=lambda: 1).outgoing(headers) == []


def test_allowed_headers_are_forwarded_in_order_matching_names_case_insensitively() -> None:
    propagation = HeaderPropagation(["Tenant", "x-request-id"], span_ids=lambda: 1)
    out = propagation.outgoing(
        [("tenant", b"a"), ("x-other", b"no"), ("X-Request-Id", b"r1"), ("tenant", b"b")]
    )
    assert out == [("tenant", b"a"), ("X-Request-Id", b"r1"), ("tenant", b"b")]


def test_the_workers_span_ids_are_random_and_never_zero() -> None:
    propagation = HeaderPropagation()
    spans = {
        parse_traceparent(propagation.outgoing([("traceparent", VALID.encode())])[0][1].decode())
        for _ in range(50)
    }
    assert len(spans) == 50
    assert all(s is not None and s.parent_id != "0" * 16 and s.trace_id == TRACE for s in spans)
