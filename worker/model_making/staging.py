"""A model directory written whole or not at all: built in a staging directory beside it, which
replaces it only once everything is written (a build that fails or is interrupted leaves the
previous model, or nothing, never half of one)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def staged_directory(out_dir: Path) -> Iterator[Path]:
    """Yield an empty directory beside ``out_dir`` to write into; when the block ends without
    an error it replaces ``out_dir``, otherwise it is removed."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    staging.chmod(0o755)  # mkdtemp makes it private; a model is not a secret
    try:
        yield staging
        if out_dir.exists():
            shutil.rmtree(out_dir)
        staging.rename(out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
