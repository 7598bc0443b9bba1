"""The benchmark corpus, gathered at run time from the installed Python packages.

Each installed distribution's long description (the body of its METADATA: usually the
project README, markdown with code blocks and tables, sometimes reStructuredText or plain
prose) is one document. Nothing is downloaded and nothing is committed: the corpus is the
project's installed dependency closure (what the bootstrap installs; ``everything=True``:
every installed distribution), listed in a stable order, so two runs read the same bytes
wherever the same pins are installed. Third-party text stays in site-packages.
"""

from __future__ import annotations

import argparse
import email.message
import importlib.metadata
import re
import shutil
import subprocess
from pathlib import Path
from typing import cast

import msgspec

from worker.chunking.types import ContentType

_ARABIC = re.compile(r"[\u0600-\u06ff]")


class Document(msgspec.Struct, frozen=True):
    name: str
    text: str
    content_type: ContentType


# What a checkout installs but the docs tooling (scripts/bootstrap: ``.[dev,model,deploy,docs]``
# less ``docs``): the corpus is the
# descriptions of those distributions and their dependencies, whatever else is installed, so
# that tests over it judge the same documents on every machine that ran the bootstrap.
PROJECT = "chunkstream"
EXTRAS = ("dev", "model", "deploy")


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_closure(root: str = PROJECT, extras: tuple[str, ...] = EXTRAS) -> set[str]:
    """Normalised names of ``root`` with ``extras`` and everything it requires, transitively,
    among the installed distributions (requirements whose markers do not apply are skipped)."""
    from packaging.requirements import Requirement

    installed = {
        _key(_metadata(d).get("Name") or ""): d for d in importlib.metadata.distributions()
    }
    found: set[str] = set()
    todo: list[tuple[str, frozenset[str]]] = [(_key(root), frozenset(extras))]
    while todo:
        name, wanted = todo.pop()
        dist = installed.get(name)
        if dist is None or (name in found and not wanted):
            continue
        found.add(name)
        for line in dist.requires or []:
            requirement = Requirement(line)
            marker = requirement.marker
            applies = marker is None or any(
                marker.evaluate({"extra": extra}) for extra in (*wanted, "")
            )
            if applies and _key(requirement.name) not in found:
                todo.append((_key(requirement.name), frozenset(requirement.extras)))
    return found


def _metadata(dist: importlib.metadata.Distribution) -> email.message.Message:
    """A distribution's metadata as what it is at run time: the standard library types it as
    a protocol without ``get``/``get_payload``, but hands out an ``email.message.Message``."""
    return cast(email.message.Message, dist.metadata)


def gather(min_chars: int = 500, *, everything: bool = False) -> list[Document]:
    """One document per distribution whose description has ``min_chars`` or more: of the
    project's dependency closure (:func:`installed_closure`), or of every installed one."""
    seen: dict[str, Document] = {}
    closure = None if everything else installed_closure()
    for dist in importlib.metadata.distributions():
        meta = _metadata(dist)
        name = (meta.get("Name") or "").lower()
        if not name or name in seen:
            continue
        if closure is not None and _key(name) not in closure:
            continue
        body = meta.get_payload() or meta.get("Description") or ""
        if not isinstance(body, str) or len(body) < min_chars:
            continue
        declared = (meta.get("Description-Content-Type") or "").lower()
        kind: ContentType = "text/markdown" if "markdown" in declared else "text/plain"
        seen[name] = Document(name, body, kind)
    return [seen[name] for name in sorted(seen)]


def describe(docs: list[Document]) -> str:
    chars = sum(len(d.text) for d in docs)
    size = sum(len(d.text.encode()) for d in docs)
    markdown = sum(d.content_type == "text/markdown" for d in docs)
    arabic = sum(bool(_ARABIC.search(d.text)) for d in docs)
    return (
        f"{len(docs)} documents ({markdown} markdown), {chars:,} characters, "
        f"{size / 1e6:.2f} MB UTF-8, {arabic} with Arabic script"
    )


# Debian packages of Sphinx-built documentation whose ``_sources`` directories hold the
# reStructuredText each page was built from: hand-written manuals, guides and tutorials of
# real size (about 30 MB in all on Debian 12), each page written once. The package corpus
# above is 0.8 MB, so a 40 MB run of it repeats every document some fifty times, and every
# memory of text the worker keeps (piece ids, token counts) is warm after the first copy;
# these pages are new text from the first byte to the last.
DEBIAN_DOCS = (
    "python3.11-doc",
    "python-pandas-doc",
    "python-sklearn-doc",
    "python-astropy-doc",
    "python-celery-doc",
    "python-skimage-doc",
    "sphinx-doc",
    "python-statsmodels-doc",
    "cython-doc",
    "python-flask-doc",
)
# More, for a corpus past issue 23's 40 MB without a page read twice (docs/benchmarks.md).
DEBIAN_DOCS_MORE = (
    "cmake-doc",
    "python-brian-doc",
    "python-sympy-doc",
    "python-ase-doc",
    "python-dask-doc",
    "python-ruffus-doc",
    "python-fonttools-doc",
    "python-openstackclient-doc",
    "python-qutip-doc",
    "python-mdanalysis-doc",
    "python-sfepy-doc",
    "python-pymatgen-doc",
    "python-ezdxf-doc",
    "python-astroquery-doc",
    "python-bioxtasraw-doc",
    "python-pydicom-doc",
    "python-xraylarch-doc",
    "python-cherrypy3-doc",
    "python-distributed-doc",
    "python-bs4-doc",
    "python-cmd2-doc",
    "python-behave-doc",
    "python-sortedcontainers-doc",
    "python-astroplan-doc",
)
# Generated API stubs (a heading and a directive each) are not documents anyone would index.
_GENERATED = re.compile(r"/(api|generated)/")


def debian_docs(
    cache: Path, packages: tuple[str, ...] = DEBIAN_DOCS, min_chars: int = 500
) -> list[Document]:
    """The ``_sources`` pages of ``packages``, fetched once into ``cache`` with
    ``apt-get download`` and unpacked with ``dpkg-deb`` (Debian's tools: nothing vendored, and
    nothing of it committed), in a stable order."""
    docs: list[Document] = []
    for package in packages:
        unpacked = cache / package
        if not (unpacked / ".complete").exists():
            _fetch_deb(package, unpacked)
        for path in sorted(unpacked.rglob("_sources/**/*.txt")):
            name = path.relative_to(unpacked).as_posix()
            if _GENERATED.search(name):
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            if len(text) >= min_chars:
                docs.append(Document(f"{package}:{name}", text, "text/plain"))
    return docs


def _fetch_deb(package: str, unpacked: Path) -> None:
    shutil.rmtree(unpacked, ignore_errors=True)
    unpacked.mkdir(parents=True)
    download = subprocess.run(
        ["apt-get", "download", package], cwd=unpacked, capture_output=True, text=True
    )
    debs = sorted(unpacked.glob("*.deb"))
    if not debs:
        raise RuntimeError(
            f"apt-get download {package} failed (try `apt-get update` first):\n{download.stderr}"
        )
    subprocess.run(["dpkg-deb", "-x", str(debs[0]), str(unpacked)], check=True)
    debs[0].unlink()
    (unpacked / ".complete").touch()


CORPORA = ("packages", "debian-docs", "debian-docs-40mb")
_CACHE = Path(__file__).resolve().parents[2] / ".cache" / "corpus"


def add_corpus_argument(parser: argparse.ArgumentParser) -> None:
    """The benches' ``--corpus`` option (:func:`load` reads it)."""
    parser.add_argument(
        "--corpus",
        choices=CORPORA,
        default="packages",
        help="packages: the installed packages' descriptions (0.8 MB, repeated); debian-docs: "
        "Sphinx sources of Debian's documentation packages (25.7 MB, each page once); "
        "debian-docs-40mb: 24 packages more, 40.27 MB (each page once)",
    )


def load(corpus: str) -> list[Document]:
    """A corpus by its name in :data:`CORPORA` (the benches' ``--corpus``)."""
    if corpus == "packages":
        return gather()
    if corpus == "debian-docs":
        return debian_docs(_CACHE / "debian-docs")
    if corpus == "debian-docs-40mb":
        return debian_docs(_CACHE / "debian-docs", DEBIAN_DOCS + DEBIAN_DOCS_MORE)
    raise ValueError(f"unknown corpus {corpus!r}: one of {', '.join(CORPORA)}")
