"""Input documents of the offline commands: a file's own text, or stdin's.

Invariants:

- The text is the file's bytes decoded as UTF-8, nothing else changed: line ends are kept as
  they are (CRLF stays CRLF; no universal-newline translation), so a chunk's
  ``start_index``/``end_index`` index the file's own text.
- The one exception is a UTF-8 byte-order mark at the start: it is not text, so it is
  dropped and the offsets count from the character after it (character 0 is the first
  character after the BOM). ``chunk --help`` and the README say so.
- ``-`` names stdin (read to its end, same rules); it may be given once.
- A failure is :class:`~worker.errors.InputUnreadable` with one line naming the file and why
  (for non-UTF-8 input, the byte offset in the file and the byte).
"""

from __future__ import annotations

import codecs
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast, get_args

from worker.chunking.types import ContentType
from worker.errors import ConfigError, InputUnreadable

STDIN = "-"
MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdx"})
CONTENT_TYPES: tuple[str, ...] = get_args(ContentType)


@dataclass(frozen=True)
class InputDocument:
    name: str
    """The path as given (``-`` for stdin): the ``doc_id`` of ``chunk``'s output."""
    text: str
    content_type: ContentType


def content_type_for(name: str, given: str | None = None) -> ContentType:
    """``given`` (``--content-type``) when set, else markdown by suffix, else plain text (stdin
    has no suffix: plain text unless told)."""
    if given is not None:
        if given not in CONTENT_TYPES:  # argparse's choices already refuse it; a library caller
            raise ConfigError(
                f"invalid --content-type {given!r}: expected one of {', '.join(CONTENT_TYPES)}"
            )
        return cast(ContentType, given)
    if name != STDIN and Path(name).suffix.lower() in MARKDOWN_SUFFIXES:
        return "text/markdown"
    return "text/plain"


def decode(data: bytes, name: str) -> str:
    """``data`` as UTF-8 text with a leading byte-order mark dropped (module docstring)."""
    skipped = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        return data[skipped:].decode("utf-8")
    except UnicodeDecodeError as exc:
        at = exc.start + skipped
        raise InputUnreadable(
            f"cannot read {name}: not UTF-8 (byte {at} is 0x{data[at]:02x})"
        ) from None


def read_bytes(name: str) -> bytes:
    try:
        if name == STDIN:
            return sys.stdin.buffer.read()
        return Path(name).read_bytes()
    except OSError as exc:
        raise InputUnreadable(f"cannot read {name}: {exc.strerror or exc}") from None


def read_document(name: str, content_type: str | None = None) -> InputDocument:
    return InputDocument(name, decode(read_bytes(name), name), content_type_for(name, content_type))


def check_openable(names: Sequence[str]) -> None:
    """Every path can be opened for reading (stdin named at most once): a typo'd path or a
    directory fails here, before a command prints or sends anything. Whether a file is UTF-8
    is only known once it is read."""
    if list(names).count(STDIN) > 1:
        raise ConfigError("'-' (stdin) may be given only once")
    for name in names:
        if name == STDIN:
            continue
        try:
            with open(name, "rb"):
                pass
        except OSError as exc:
            raise InputUnreadable(f"cannot read {name}: {exc.strerror or exc}") from None
