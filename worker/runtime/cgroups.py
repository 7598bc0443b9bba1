"""What the container may use: the CPU quota and memory limit of this process's cgroup.

Invariants:
- Pure readers over a directory tree: every function takes the cgroup mount root and the text
  of ``/proc/self/cgroup``, so tests hand them a fake tree; only :func:`host_view` touches the
  real ``/sys/fs/cgroup`` and ``/proc``.
- cgroup v2 (``cpu.max``, ``memory.max``) is read where the unified hierarchy is mounted at the
  root; v1 (``cpu.cfs_quota_us``/``cpu.cfs_period_us``, ``memory.limit_in_bytes``) under the
  ``cpu``/``memory`` controller directories.
- Limits nest: the effective limit is the smallest one on the path from this process's cgroup
  up to the root. Inside a container with its own cgroup namespace that path is just the root;
  when the path in ``/proc/self/cgroup`` does not exist under the mount (a host path seen from a
  container), the mount root is what applies.
- "No limit" is None: v2 ``max``, v1 quota ``-1`` and v1's near-2^63 "unlimited" memory.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

T = TypeVar("T", int, float)

CGROUP_ROOT = Path("/sys/fs/cgroup")
# cgroup v1 reports "no memory limit" as the largest page-aligned signed 64-bit value; anything
# this large is no limit a pod could have.
_V1_UNLIMITED = 1 << 60


@dataclass(frozen=True)
class CgroupLimits:
    cpu_cores: float | None  # quota / period, e.g. 1.5; None = no quota
    memory_bytes: int | None  # None = no limit


def read_limits(root: Path, self_cgroup: str) -> CgroupLimits:
    """The CPU quota and memory limit that bind this process (v2 first, then v1)."""
    paths = _paths(self_cgroup)
    if (root / "cgroup.controllers").is_file():  # the unified hierarchy is mounted at root
        dirs = _chain(root, paths.get(""))
        return CgroupLimits(_min(_v2_cpu(d) for d in dirs), _min(_v2_memory(d) for d in dirs))
    cpu_root = _controller_root(root, ("cpu", "cpu,cpuacct", "cpuacct,cpu"))
    mem_root = _controller_root(root, ("memory",))
    cpu = None
    if cpu_root is not None:
        cpu = _min(_v1_cpu(d) for d in _chain(cpu_root, _v1_path(paths, "cpu")))
    memory = None
    if mem_root is not None:
        memory = _min(_v1_memory(d) for d in _chain(mem_root, _v1_path(paths, "memory")))
    return CgroupLimits(cpu, memory)


def host_view() -> CgroupLimits:
    """The limits of the running process, read from /sys/fs/cgroup (none when unreadable)."""
    try:
        self_cgroup = Path("/proc/self/cgroup").read_text()
    except OSError:
        return CgroupLimits(None, None)
    return read_limits(CGROUP_ROOT, self_cgroup)


def _paths(self_cgroup: str) -> dict[str, str]:
    """``/proc/self/cgroup`` lines ``id:controllers:path`` → {controllers: path}."""
    out: dict[str, str] = {}
    for line in self_cgroup.splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) == 3:
            out[parts[1]] = parts[2]
    return out


def _v1_path(paths: dict[str, str], controller: str) -> str | None:
    for controllers, path in paths.items():
        if controller in controllers.split(","):
            return path
    return None


def _controller_root(root: Path, names: tuple[str, ...]) -> Path | None:
    for name in names:
        if (root / name).is_dir():
            return root / name
    return None


def _chain(mount: Path, path: str | None) -> list[Path]:
    """Directories from the process's cgroup up to the mount root (the root alone when the
    path is unknown or not visible under this mount)."""
    if not path or path == "/":
        return [mount]
    leaf = mount / path.lstrip("/")
    if not leaf.is_dir():
        return [mount]
    chain = [leaf]
    while chain[-1] != mount:
        chain.append(chain[-1].parent)
    return chain


def _min(values: Iterable[T | None]) -> T | None:
    found = [v for v in values if v is not None]
    return min(found) if found else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _v2_cpu(directory: Path) -> float | None:
    raw = _read(directory / "cpu.max")
    if raw is None:
        return None
    quota, _, period = raw.partition(" ")
    if quota == "max":
        return None
    return int(quota) / int(period or "100000")


def _v2_memory(directory: Path) -> int | None:
    raw = _read(directory / "memory.max")
    return None if raw is None or raw == "max" else int(raw)


def _v1_cpu(directory: Path) -> float | None:
    quota, period = _read(directory / "cpu.cfs_quota_us"), _read(directory / "cpu.cfs_period_us")
    if quota is None or period is None or int(quota) <= 0:
        return None
    return int(quota) / int(period)


def _v1_memory(directory: Path) -> int | None:
    raw = _read(directory / "memory.limit_in_bytes")
    if raw is None or int(raw) >= _V1_UNLIMITED:
        return None
    return int(raw)
