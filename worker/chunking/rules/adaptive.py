"""The ``adaptive`` strategy: chunk size follows the information density of the text.

Dense text (code, API reference, mathematics) gets small chunks, plain prose large ones:

    target_size = max_size − density × (max_size − min_size)

Density is measured *locally*: for each chunk, on the ``base_size`` characters ahead of where
it starts, so a prose introduction followed by a code section gets large then small chunks.
Code fences are section edges too: a chunk that starts in prose ends before a fence, and one
that starts inside fenced code ends after the closing fence.

Sentences (hard-wrapped prose read as one line; the end of the text always ends the last one)
accumulate until the next one would pass the target. On overflow the chunk is
emitted and its trailing whole sentences of at most ``overlap`` characters start the next
chunk (dropped when they would leave no room for a new sentence). A first sentence longer than
the target is kept whole up to ``max_size``; beyond that it is cut at an Arabic clause mark
(when ``language`` allows), then a word boundary, then a character. All sizes are characters,
and ``max_size`` is a hard cap. Chunks are contiguous slices of the document. Each carries
its ``content_type`` (``code``/``technical``/``prose``), ``char_count`` and ``language``.
"""

from __future__ import annotations

import secrets
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping
from types import ModuleType
from typing import Annotated, cast

import msgspec
import numpy as np
from numpy.typing import NDArray

from worker.chunking import _native as native
from worker.chunking.text.boundaries import (
    SentenceIndex,
    fence_lines,
    last_clause_end,
    last_word_end,
)
from worker.chunking.text.density import DocumentProfile, detect_language, native_tables
from worker.chunking.text.lexicon import ARABIC_COMPLEX_MIN_LETTERS
from worker.chunking.text.segment import ABBREVIATIONS
from worker.chunking.types import Chunk, ContentType

NAME = "adaptive"
LANGUAGES = ("auto", "ar", "en")
MAX_SIZE = 1 << 29
"""Upper bound of every size parameter: far above any document the worker accepts, and
small enough that offsets plus sizes stay exact in the core's integers and numpy's."""


class AdaptiveParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    base_size: Annotated[int, msgspec.Meta(ge=1, le=MAX_SIZE)] = 512
    """Characters read ahead of a chunk's start to measure its local density."""
    min_size: Annotated[int, msgspec.Meta(ge=1, le=MAX_SIZE)] = 100
    """Target for the densest text (density 1)."""
    max_size: Annotated[int, msgspec.Meta(ge=1, le=MAX_SIZE)] = 1500
    """Target for the sparsest text (density 0), and the hard cap on every chunk."""
    overlap: Annotated[int, msgspec.Meta(ge=0, le=MAX_SIZE)] = 128
    """Most characters of trailing whole sentences carried into the next chunk."""
    technical_threshold: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)] = 0.5
    """Only labels chunks (``technical`` in metadata); the size follows density continuously."""
    language: str = "auto"
    """``auto`` or ``ar``: an Arabic comma may cut an over-long sentence; ``en``: it may not."""

    def __post_init__(self) -> None:
        if self.min_size > self.max_size:
            raise ValueError(
                f"min_size ({self.min_size}) must not exceed max_size ({self.max_size})"
            )
        if self.language not in LANGUAGES:
            raise ValueError(f"language must be one of {', '.join(LANGUAGES)}")


class ChunkConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Settings that, where set, override :class:`AdaptiveChunker`'s keyword arguments."""

    adaptive_base_size: int | None = None
    adaptive_min_size: int | None = None
    adaptive_max_size: int | None = None
    overlap: int | None = None
    adaptive_technical_threshold: float | None = None


class Document(msgspec.Struct, frozen=True):
    """One input of :meth:`AdaptiveChunker.chunk_documents`."""

    text: str
    doc_id: str = ""
    source: str = ""


def _pick(override: object, value: object) -> object:
    return value if override is None else override


# The compiled core (``_adaptive_core.c``): the whole of chunk_reference() for a document in
# one call, with the same rules and the same output.
_NativeChunk = Callable[
    [str, int, int, int, int, bool, int, float, dict[str, object], str], list[Chunk]
]


def _configure(core: ModuleType) -> None:
    classes, tech, stop = native_tables()
    # The seed lays out the core's hash tables (never the output): drawn per process so that
    # no document can be crafted to collide in them.
    seed = secrets.randbits(64)
    core.configure(classes, tech, stop, sorted(ABBREVIATIONS), Chunk, NAME, seed)


def _load_core() -> _NativeChunk | None:
    core = native.load("_adaptive_core", _configure)
    return None if core is None else cast(_NativeChunk, core.chunk)


NATIVE_MAX_CHARS = 1 << 29
"""Longer texts take the Python path (the core packs word indices into 30 bits)."""
NATIVE_CHUNK = _load_core()
"""The compiled core's entry point, or None when it is not built (or not allowed)."""


class AdaptiveChunker:
    """Density-driven sentence packing; see the module docstring for the rules."""

    def __init__(
        self,
        config: ChunkConfig | None = None,
        *,
        base_size: int = 512,
        min_size: int = 100,
        max_size: int = 1500,
        overlap: int = 128,
        technical_threshold: float = 0.5,
        language: str = "auto",
    ) -> None:
        config = config or ChunkConfig()
        settings = {
            "base_size": _pick(config.adaptive_base_size, base_size),
            "min_size": _pick(config.adaptive_min_size, min_size),
            "max_size": _pick(config.adaptive_max_size, max_size),
            "overlap": _pick(config.overlap, overlap),
            "technical_threshold": _pick(config.adaptive_technical_threshold, technical_threshold),
            "language": language,
        }
        try:
            self.params = msgspec.convert(settings, AdaptiveParams)
        except msgspec.ValidationError as exc:
            raise ValueError(str(exc)) from exc

    @classmethod
    def from_params(cls, params: AdaptiveParams) -> AdaptiveChunker:
        return cls(
            base_size=params.base_size,
            min_size=params.min_size,
            max_size=params.max_size,
            overlap=params.overlap,
            technical_threshold=params.technical_threshold,
            language=params.language,
        )

    def target_size(self, local_density: float) -> int:
        p = self.params
        return round(p.max_size - local_density * (p.max_size - p.min_size))

    def chunk(
        self,
        text: str,
        doc_id: str = "",
        source: str = "",
        *,
        content_type: ContentType = "text/plain",
    ) -> list[Chunk]:
        """Chunks of ``text``; ``content_type`` is accepted for the registry's contract.

        Runs the compiled core when it is built, else :meth:`chunk_reference`; both return
        the same chunks."""
        if NATIVE_CHUNK is None or len(text) >= NATIVE_MAX_CHARS:
            return self.chunk_reference(text, doc_id, source)
        p = self.params
        return NATIVE_CHUNK(
            text,
            p.base_size,
            p.min_size,
            p.max_size,
            p.overlap,
            p.language != "en",
            ARABIC_COMPLEX_MIN_LETTERS,
            p.technical_threshold,
            _identity(doc_id, source),
            p.language,
        )

    def chunk_reference(self, text: str, doc_id: str = "", source: str = "") -> list[Chunk]:
        """The pure-Python definition of :meth:`chunk` (the compiled core's twin)."""
        p = self.params
        size = len(text)
        start = _skip_space(text, 0)
        if start == size:
            return []
        fences = fence_lines(text)
        sections = _Sections(text, fences) if fences else None
        # One pass over the whole document: sentence-end candidates, the document's density
        # and every window's.
        profile = DocumentProfile(
            text, p.base_size, sections.ends if sections else None, fences=fences
        )
        doc_density = profile.document_density
        sentences = SentenceIndex(text, profile.anchors)
        last_end = sentences.last_end
        carried_start = sentences.carried_start
        window = profile.window
        # The loop runs once per chunk: parameters and helpers are read into locals once.
        max_size, overlap = p.max_size, p.overlap
        spread = max_size - p.min_size
        threshold = p.technical_threshold
        extra = _identity(doc_id, source)
        language = detect_language(text) if p.language == "auto" else p.language
        in_code = sections.in_code if sections is not None else _never
        chunks: list[Chunk] = []
        append = chunks.append
        floor = start  # a chunk must end after this: past any text carried over
        while start < size:
            section_end = sections.end(start) if sections is not None else size
            local = window(start)
            target = round(max_size - local * spread)  # as target_size()
            limit = start + target
            if section_end < limit:
                limit = section_end
            end = last_end(start, floor, limit)
            if end is None:
                if floor > start:
                    # The carried sentences leave no room for the next one: drop them.
                    start = floor = _skip_space(text, floor)
                    continue
                end = self._cut_long_sentence(sentences, start, min(size, start + max_size))
            body = text[start:end]
            metadata: dict[str, object] = {
                "chunk_index": len(chunks),
                "density": doc_density,
                "local_density": local,
                "target_size": target,
                "technical": local >= threshold,
                "content_type": content_kind(in_code(start), local, threshold),
                "char_count": end - start,
                "language": language,
            }
            if extra:
                metadata.update(extra)
            append(Chunk(body, start, end, end - start, NAME, metadata))
            following = _skip_space(text, end)
            if following >= size:
                break
            carried = carried_start(start, end, overlap)
            if carried is None:
                start = floor = following
            else:
                start, floor = carried, end
        return chunks

    def chunk_documents(self, docs: Iterable[Document | Mapping[str, str]]) -> list[Chunk]:
        """Chunks of every document in order; ``doc_id``/``source`` go into metadata."""
        chunks: list[Chunk] = []
        for doc in docs:
            if isinstance(doc, Document):
                chunks.extend(self.chunk(doc.text, doc.doc_id, doc.source))
            else:
                chunks.extend(self.chunk(doc["text"], doc.get("doc_id", ""), doc.get("source", "")))
        return chunks

    def _cut_long_sentence(self, sentences: SentenceIndex, start: int, hard_limit: int) -> int:
        """End of a chunk whose first sentence is longer than its target."""
        end = sentences.first_end(start, hard_limit)
        if end is not None:
            return end
        text = sentences.text
        if self.params.language != "en":
            end = last_clause_end(text, start, hard_limit)
            if end is not None:
                return end
        end = last_word_end(text, start, hard_limit)
        return end if end is not None else hard_limit


def content_kind(in_code: bool, local_density: float, technical_threshold: float) -> str:
    """The design's naming of a chunk's content: ``code`` inside a fenced code section,
    ``technical`` at or above the technical threshold, ``prose`` below it."""
    if in_code:
        return "code"
    return "technical" if local_density >= technical_threshold else "prose"


def _never(position: int) -> bool:
    return False


def _identity(doc_id: str, source: str) -> dict[str, object]:
    """The metadata every chunk of a document carries: its id and source, when given."""
    extra: dict[str, object] = {}
    if doc_id:
        extra["doc_id"] = doc_id
    if source:
        extra["source"] = source
    return extra


def _skip_space(text: str, position: int) -> int:
    """``position`` moved right past whitespace (``str.isspace``), 256 characters at a time."""
    size = len(text)
    while position < size and text[position].isspace():
        piece = text[position : position + 256]
        skipped = len(piece) - len(piece.lstrip())
        position += skipped
        if skipped < len(piece):
            break
    return position


class _Sections:
    """Code-fence sections: where the section holding an offset ends.

    Fence lines alternate opener, closer. Outside code the section ends where the next
    opener's line begins; inside, where the closer's line ends. Without a next fence it runs
    to the end of the text.
    """

    def __init__(self, text: str, fences: list[int]) -> None:
        size = len(text)
        self.fences = fences
        line_ends = [text.find("\n", fence) for fence in fences]
        # Where the section ends for each count of fences at or before an offset.
        self.stops = [
            fence if i % 2 == 0 else (size if line_end < 0 else line_end)
            for i, (fence, line_end) in enumerate(zip(fences, line_ends, strict=True))
        ]
        self.stops.append(size)
        self._stops = np.array(self.stops, dtype=np.int64)
        self._fences = np.array(fences, dtype=np.int64)

    def end(self, start: int) -> int:
        return self.stops[bisect_right(self.fences, start)]

    def in_code(self, start: int) -> bool:
        """Whether ``start`` lies in a fenced code section (its fence line included)."""
        return bisect_right(self.fences, start) % 2 == 1

    def ends(self, starts: NDArray[np.int64]) -> NDArray[np.int64]:
        """:meth:`end` for many offsets at once."""
        return self._stops[np.searchsorted(self._fences, starts, side="right")]
