"""The benchmark corpus, gathered at run time from the installed Python packages.

Each installed distribution's long description (the body of its METADATA: usually the
project README, markdown with code blocks and tables, sometimes reStructuredText or plain
prose) is one document. Nothing is downloaded and nothing is committed: the corpus is the
project's installed dependency closure (what the bootstrap installs; ``everything=True``:
every installed distribution), listed in a stable order, so two runs read the same bytes
wherever the same pins are installed. Third-party text stays in site-packages.
"""

from __future__ import annotations

import email.message
import importlib.metadata
import re
from typing import cast

import msgspec

_ARABIC = re.compile(r"[\u0600-\u06ff]")


class Document(msgspec.Struct, frozen=True):
    name: str
    text: str
    content_type: str  # "text/markdown" or "text/plain"


# What a checkout installs (scripts/bootstrap: ``.[dev,model,deploy]``): the corpus is the
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
        kind = "text/markdown" if "markdown" in declared else "text/plain"
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
