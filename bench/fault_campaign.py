"""The fault campaign over many seeds (tests/support/campaign.py), on a private broker.

    .venv/bin/python -m bench.fault_campaign [--plan full] [--seeds 20] [--first-seed 1]
        [--guarantee at-least-once exactly-once] [--keep]

Runs the seeds in a row, each under every guarantee asked for, prints one table row per run and
exits 1 if any run failed (its logs are kept and named). docs/benchmarks.md keeps the last
table of the ``full`` plan with the command that made it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from tests.support.campaign import PLANS, Outcome, run_one, table
from tests.support.private_broker import PrivateBroker


async def campaign(
    broker: PrivateBroker, workdir: Path, plan: str, seeds: Sequence[int], guarantees: list[str]
) -> list[Outcome]:
    outcomes = []
    for seed in seeds:
        for guarantee in guarantees:
            print(f"campaign: seed {seed}, {guarantee} ...", file=sys.stderr, flush=True)
            outcome = await run_one(broker, workdir, PLANS[plan], seed, guarantee)
            print(table([outcome]).splitlines()[-1], file=sys.stderr, flush=True)
            for note in outcome.notes:
                print(f"  - {note}", file=sys.stderr, flush=True)
            outcomes.append(outcome)
    return outcomes


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", choices=sorted(PLANS), default="full")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument(
        "--guarantee",
        nargs="+",
        choices=["at-least-once", "exactly-once"],
        default=["at-least-once", "exactly-once"],
    )
    parser.add_argument("--keep", action="store_true", help="keep every run's logs")
    args = parser.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="chunkstream-campaign-"))
    broker = PrivateBroker(base / "broker")
    broker.start()
    started = time.monotonic()
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    try:
        outcomes = asyncio.run(campaign(broker, base / "runs", args.plan, seeds, args.guarantee))
    finally:
        broker.stop()
    failed = [o for o in outcomes if not o.ok]
    print(
        f"\nfault campaign, plan {args.plan}, seeds {seeds.start}..{seeds.stop - 1}, "
        f"{time.monotonic() - started:.0f} s, {os.cpu_count()} cores"
        + ("" if not failed else f"; logs of failed runs under {base}")
        + "\n"
    )
    print(table(outcomes))
    for o in failed:
        for note in o.notes:
            print(f"- seed {o.seed} {o.guarantee}: {note}")
    if not failed and not args.keep:
        shutil.rmtree(base, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
