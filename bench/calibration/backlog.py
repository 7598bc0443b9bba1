"""Calibration of ``chunkstream_backlog_seconds``: the estimate against the measured drain time.

    .venv/bin/python -m bench.calibration.backlog [--bootstrap HOST:PORT] [--only NAME ...]

Runs every configuration of tests/support/backlog_drain.py (document size × strategy ×
embeddings on/off) on a private broker unless ``--bootstrap`` is given, and prints one row per
configuration as it finishes, then the whole table: the estimate, the drain, their ratio and
the cost per input byte the worker measured. The procedure lives in tests/support because
tests/broker/test_backlog_estimate.py runs two of its rows in the suite.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from tests.support.backlog_drain import CASES, Result, calibrate, table
from tests.support.private_broker import PrivateBroker


async def run(bootstrap: str | None, only: Sequence[str], workdir: Path) -> list[Result]:
    broker = None
    if bootstrap is None:
        broker = PrivateBroker(workdir / "broker")
        await asyncio.to_thread(broker.start)
        bootstrap = broker.bootstrap
    try:
        results = []
        for name in only or list(CASES):
            result = await calibrate(bootstrap, CASES[name], workdir)
            print(table([result]).splitlines()[-1], flush=True)
            results.append(result)
        return results
    finally:
        if broker is not None:
            await asyncio.to_thread(broker.stop)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--only", nargs="*", default=[], choices=list(CASES))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="backlog-cal-") as tmp:
        results = asyncio.run(run(args.bootstrap, args.only, Path(tmp)))
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
