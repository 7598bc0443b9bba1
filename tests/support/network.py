"""Talking to a worker over the loopback: a free port, plain HTTP requests and a parsed
``/metrics`` scrape."""

from __future__ import annotations

import asyncio
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable

from prometheus_client.parser import text_string_to_metric_families


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def listening(port: int) -> bool:
    """Whether something accepts connections on the loopback's ``port`` (a health server up)."""
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False
    writer.close()
    await writer.wait_closed()
    return True


async def http_get(port: int, path: str) -> tuple[int, str]:
    # A real HTTP client, in a thread: the server runs on this test's own event loop.
    return await asyncio.to_thread(_get, port, path)


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


async def scrape(port: int) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """name → {labels: value} for every sample, parsed by prometheus-client's own parser."""
    status, text = await http_get(port, "/metrics")
    assert status == 200
    samples: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return samples


def total(samples: dict[str, dict[tuple[tuple[str, str], ...], float]], name: str) -> float:
    return sum(samples.get(name, {}).values())


def try_get(port: int, path: str) -> tuple[int, str] | None:
    """(status, body) of a GET on a worker's metrics port; None if nothing answers (yet)."""
    try:
        return _get(port, path)
    except OSError:
        return None


def port_accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    except OSError:
        return False
    return True


async def until(condition: Callable[[], object], timeout_s: float, what: str) -> None:
    """Poll ``condition`` (a blocking call: run in a thread) until it holds, or fail naming
    ``what``."""
    deadline = time.monotonic() + timeout_s
    while not await asyncio.to_thread(condition):
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        await asyncio.sleep(0.2)
