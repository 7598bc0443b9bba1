"""The benchmark corpus, gathered at run time from the installed Python packages.

Each installed distribution's long description (the body of its METADATA: usually the
project README, markdown with code blocks and tables, sometimes reStructuredText or plain
prose) is one document. Nothing is downloaded and nothing is committed: the corpus is
whatever this environment holds, listed in a stable order, so two runs on one machine read
the same bytes. Third-party text stays in site-packages.
"""

from __future__ import annotations

import importlib.metadata
import re

import msgspec

_ARABIC = re.compile(r"[\u0600-\u06ff]")


class Document(msgspec.Struct, frozen=True):
    name: str
    text: str
    content_type: str  # "text/markdown" or "text/plain"


def gather(min_chars: int = 500) -> list[Document]:
    """One document per installed distribution whose description has ``min_chars`` or more."""
    seen: dict[str, Document] = {}
    for dist in importlib.metadata.distributions():
        meta = dist.metadata
        name = (meta.get("Name") or "").lower()
        if not name or name in seen:
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
