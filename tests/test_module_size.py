"""No module in worker/ is over 500 lines: small modules with one job each."""

from __future__ import annotations

from pathlib import Path

WORKER = Path(__file__).resolve().parent.parent / "worker"
LIMIT = 500


def test_no_module_over_the_limit() -> None:
    sizes = {
        str(path.relative_to(WORKER)): len(path.read_text(encoding="utf-8").splitlines())
        for path in WORKER.rglob("*.py")
    }
    assert len(sizes) > 50  # the walk found the package
    over = {name: n for name, n in sizes.items() if n > LIMIT}
    assert not over, f"modules over {LIMIT} lines: {over}"
