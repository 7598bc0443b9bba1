"""`/metrics`, `/healthz` and `/readyz` over a minimal asyncio HTTP/1.1 server.

It runs on the worker's own event loop on purpose: if the loop is blocked, `/healthz` stops
answering and the kubelet's liveness probe notices — a thread-based server would keep saying
"ok" for a worker that no longer heartbeats.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import msgspec
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from worker.observability.metrics import Metrics

# (ready?, details) — details name what is missing, for whoever reads the probe output.
Readiness = Callable[[], tuple[bool, dict[str, object]]]

_MAX_REQUEST_BYTES = 8192
_REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}


class HealthServer:
    def __init__(self, metrics: Metrics, readiness: Readiness, host: str, port: int) -> None:
        self._metrics = metrics
        self._readiness = readiness
        self._host = host
        self._port = port
        self._server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        """The bound port (useful with port 0)."""
        if self._server is None:
            return self._port
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self._host, self._port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=5)
            if len(head) > _MAX_REQUEST_BYTES:
                raise ValueError("request too large")
            method, path, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
            status, content_type, body = self._route(method, path.split("?", 1)[0])
        except (ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            writer.close()
            return
        head_out = (
            f"HTTP/1.1 {status} {_REASONS[status]}\r\n"
            f"Content-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n"
        ).encode("latin-1")
        with contextlib.suppress(ConnectionError):
            writer.write(head_out + (b"" if method == "HEAD" else body))
            await writer.drain()
        writer.close()

    def _route(self, method: str, path: str) -> tuple[int, str, bytes]:
        if method not in ("GET", "HEAD"):
            return 405, "text/plain", b"method not allowed\n"
        if path == "/metrics":
            return 200, CONTENT_TYPE_LATEST, generate_latest(self._metrics.registry)
        if path == "/healthz":
            return 200, "application/json", b'{"status":"ok"}\n'
        if path == "/readyz":
            ready, details = self._readiness()
            self._metrics.ready.set(1 if ready else 0)
            body = msgspec.json.encode({"ready": ready, **details}) + b"\n"
            return (200 if ready else 503), "application/json", body
        return 404, "text/plain", b"not found\n"
