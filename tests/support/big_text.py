"""Real text of several megabytes, gathered at run time from what is installed: the standard
library's own modules, whole files in a stable order. Code, docstrings and comments: the kind of
document a code-search or manual index takes whole. Nothing is downloaded or committed."""

from __future__ import annotations

import sysconfig
from pathlib import Path

# Tests and IDLE are left out: generated data and fixtures rather than text anyone indexes.
_SKIPPED = {"test", "tests", "idlelib", "site-packages", "__pycache__"}


def stdlib_sources(min_bytes: int) -> str:
    """The standard library's modules, whole, in sorted path order, separated by blank lines,
    until at least ``min_bytes`` of UTF-8 (the library holds tens of megabytes)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    parts: list[str] = []
    size = 0
    for path in sorted(root.rglob("*.py")):
        if _SKIPPED & set(path.relative_to(root).parts):
            continue
        try:
            source = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        parts.append(f"# {path.relative_to(root).as_posix()}\n\n{source.strip()}\n")
        size += len(parts[-1].encode()) + 1
        if size >= min_bytes:
            return "\n".join(parts)
    raise RuntimeError(f"the standard library holds fewer than {min_bytes} bytes of sources")
