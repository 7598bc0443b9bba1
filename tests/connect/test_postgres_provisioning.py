"""What deploy/connect/local-postgres installs: the server headers beside a server that is
already there (the case where pgvector's build used to fail minutes in on `postgres.h`), nothing
once pgvector is built, and an error naming the packages, before any download, where apt-get
cannot run. The decisions are checked on small directory trees with a stand-in pg_config, and
the detection once on this machine's real PostgreSQL after the script has provisioned it."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
LOCAL_POSTGRES = REPO / "deploy" / "connect" / "local-postgres"


def load_script() -> ModuleType:
    """The script as a module (it has no .py suffix, so the loader is named explicitly)."""
    loader = importlib.machinery.SourceFileLoader("local_postgres", str(LOCAL_POSTGRES))
    spec = importlib.util.spec_from_loader("local_postgres", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    # Registered first: dataclasses looks its module up while the class is made.
    sys.modules[spec.name] = module
    loader.exec_module(module)
    return module


script = load_script()
SERVER_DEV = f"postgresql-server-dev-{script.PG_MAJOR}"
SERVER = f"postgresql-{script.PG_MAJOR}"


def layout(root: Path, *, server: bool, headers: bool, pgvector: bool) -> Path:
    """A Debian-like tree under ``root`` with the parts asked for; its bin directory, whose
    pg_config answers with paths inside ``root`` as the real one does with /usr/…."""
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    include, pgxs, share = root / "include" / "server", root / "pgxs.mk", root / "share"
    if server:
        (bin_dir / "postgres").write_text("")
        pg_config = bin_dir / "pg_config"
        pg_config.write_text(f"#!/bin/sh\nprintf '%s\\n' {include} {pgxs} {share}\n")
        pg_config.chmod(0o755)
    if headers:
        include.mkdir(parents=True)
        (include / "postgres.h").write_text("")
        pgxs.write_text("")
    if pgvector:
        (share / "extension").mkdir(parents=True)
        (share / "extension" / "vector.control").write_text("")
    return bin_dir


@pytest.mark.parametrize(
    ("server", "headers", "pgvector", "expected"),
    [
        # The machine: PostgreSQL installed, its server headers not.
        (True, False, False, [SERVER_DEV]),
        (False, False, False, [SERVER, SERVER_DEV]),
        (True, True, False, []),
        # pgvector built: the headers are not needed any more.
        (True, False, True, []),
        (True, True, True, []),
    ],
)
def test_what_is_found_decides_what_is_installed(
    tmp_path: Path, server: bool, headers: bool, pgvector: bool, expected: list[str]
) -> None:
    bin_dir = layout(tmp_path, server=server, headers=headers, pgvector=pgvector)
    found = script.find_installed(bin_dir)
    assert (found.server, found.headers, found.pgvector) == (server, headers and server, pgvector)
    with_tools = script.Found(found.server, found.headers, found.pgvector, ("make", "gcc"))
    assert script.packages_needed(with_tools) == expected


def test_a_header_file_without_pgxs_is_not_the_headers(tmp_path: Path) -> None:
    bin_dir = layout(tmp_path, server=True, headers=True, pgvector=False)
    (tmp_path / "pgxs.mk").unlink()
    found = script.find_installed(bin_dir)
    assert (found.server, found.headers) == (True, False)


def test_build_tools_are_asked_for_only_while_pgvector_is_to_be_built() -> None:
    found = script.Found(server=True, headers=True, pgvector=False, build_tools=("gcc",))
    assert script.packages_needed(found) == ["make"]
    built = script.Found(server=True, headers=False, pgvector=True, build_tools=())
    assert script.packages_needed(built) == []


@pytest.mark.parametrize(
    ("root", "apt", "reason"),
    [(False, True, "needs root"), (True, False, "apt-get is not on PATH"), (False, False, "apt")],
)
def test_where_apt_get_cannot_run_the_message_names_the_packages(
    root: bool, apt: bool, reason: str
) -> None:
    message = script.cannot_install([SERVER_DEV], root=root, apt=apt)
    assert message is not None
    assert reason in message
    assert f"apt-get install {SERVER_DEV}" in message
    assert script.cannot_install([SERVER_DEV], root=True, apt=True) is None


def test_this_machine_after_provisioning_has_everything_and_needs_nothing() -> None:
    provisioned = subprocess.run(
        [str(LOCAL_POSTGRES), "provision"], capture_output=True, text=True, timeout=900
    )
    assert provisioned.returncode == 0, provisioned.stderr
    found = script.find_installed()
    assert (found.server, found.headers, found.pgvector) == (True, True, True)
    assert script.packages_needed(found) == []
    # What pgvector's build included: the real header, where the real pg_config points.
    include = subprocess.run(
        [str(script.PG_BIN / "pg_config"), "--includedir-server"], capture_output=True, text=True
    ).stdout.strip()
    assert (Path(include) / "postgres.h").is_file()
