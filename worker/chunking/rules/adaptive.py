"""The ``adaptive`` strategy: chunk size follows the information density of the text.

Dense text (code, API reference, mathematics) gets small chunks, plain prose large ones:

    target_size = max_size − density × (max_size − min_size)

Density is measured *locally*: for each chunk, on the ``base_size`` ahead of its first unit
(cut at the end of the fenced-code section it starts in), so a prose introduction followed
by a code section gets large then small chunks.

Since issues 19 and 21 the chunks are those of ``sentence`` (:mod:`.sentence`): the document
read into units from its structure (a paragraph's sentences, whole code blocks, tables, list
items, quotes, headings; :mod:`..text.units`) and packed by content-defined boundaries
(:mod:`..text.packing`), so that a heading or a line ending in ``:`` stays with what follows,
no chunk is under an eighth of ``max_size`` unless the document is that small, and an edit
moves only the boundaries near it. What the density decides is each chunk's own sizes: its
target (where paragraph breaks stop being optional and sentence breaks start to be) is
``target_size``, at least that minimum, and its soft cap a third more, at most ``max_size``,
the hard cap. A sentence over the unit limit is cut at Arabic commas (when ``language``
allows), then at words, then characters.

All four sizes are in the unit of ``tokenizer`` (characters, or a model's tokens; unset: the
retrieval model's when the worker has one), and ``token_count`` is the chunk's size in it.
``overlap``: a chunk also starts with the trailing whole units of the chunk before it, at
most ``overlap`` of them and never past ``max_size``; the chunk's own units leave room for
them (packing's cap is ``max_size`` less the overlap, at most a quarter of it). Chunks are
contiguous slices of the document. Each carries its ``content_type``
(``code``/``technical``/``prose``), ``char_count`` and ``language``.
"""

from __future__ import annotations

import secrets
from bisect import bisect_right
from collections.abc import Callable
from types import ModuleType
from typing import Annotated, cast

import msgspec

from worker.chunking import _native as native
from worker.chunking.rules.sizing import Sizing, own_sizing
from worker.chunking.text.character_cap import cap_chunks
from worker.chunking.text.density import DocumentProfile, detect_language, native_tables
from worker.chunking.text.lexicon import ARABIC_COMPLEX_MIN_LETTERS
from worker.chunking.text.packing import Sizes, pack
from worker.chunking.text.segment import ABBREVIATIONS, fence_lines
from worker.chunking.text.structure import GLUE, LINE
from worker.chunking.text.units import Measure, Units, WordCutter, read_units
from worker.chunking.types import Chunk, ContentType, Metadata

NAME = "adaptive"
LANGUAGES = ("auto", "ar", "en")
MAX_SIZE = 1 << 29
"""Upper bound of every size parameter: far above any document the worker accepts, and
small enough that offsets plus sizes stay exact in the core's integers."""
_Size = Annotated[int, msgspec.Meta(ge=1, le=MAX_SIZE)]


class AdaptiveParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    base_size: _Size | None = None
    """Read ahead of a chunk's first unit to measure its local density (unset: 512
    characters, 128 tokens; rules/sizing.py)."""
    min_size: _Size | None = None
    """Target for the densest text (density 1); unset: 100 characters, 25 tokens."""
    max_size: _Size | None = None
    """Target for the sparsest text (density 0), and the hard cap on every chunk; unset: 1500
    characters, the model's window in tokens (a larger value is lowered to the window)."""
    overlap: Annotated[int, msgspec.Meta(ge=0, le=MAX_SIZE)] | None = None
    """Most of the trailing whole units of a chunk repeated at the start of the next; unset:
    128 characters, 32 tokens."""
    technical_threshold: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)] = 0.5
    """Only labels chunks (``technical`` in metadata); the size follows density continuously."""
    language: str = "auto"
    """``auto`` or ``ar``: an Arabic comma may cut an over-long sentence; ``en``: it may not."""
    tokenizer: Annotated[str, msgspec.Meta(min_length=1)] | None = None
    """``"character"``, a ``tokenizer.json``, or a model directory; unset: the retrieval
    model's tokens when the worker has one, else characters."""

    def __post_init__(self) -> None:
        if self.min_size is not None and self.max_size is not None:
            _check_order(self.min_size, self.max_size)
        if self.language not in LANGUAGES:
            raise ValueError(f"language must be one of {', '.join(LANGUAGES)}")


def _check_order(min_size: int, max_size: int) -> None:
    if min_size > max_size:
        raise ValueError(f"min_size ({min_size}) must not exceed max_size ({max_size})")


# The compiled core (``_adaptive_core.c``): the whole of chunk_reference() for a document in
# one call, with the same rules and the same output; a word over the cap is cut by
# word_cuts.cut_word (None instead: the core returns None and the document needs the twin).
CompiledChunk = Callable[
    [
        str,
        tuple[int, int, int, int],
        bool,
        int,
        float,
        dict[str, object],
        str,
        object | None,
        Callable[[list[str]], list[int]] | None,
        WordCutter | None,
    ],
    list[Chunk] | None,
]


def _configure(core: ModuleType) -> None:
    classes, tech, stop = native_tables()
    # The seed lays out the core's hash tables (never the output): drawn per process so that
    # no document can be crafted to collide in them.
    seed = secrets.randbits(64)
    core.configure(classes, tech, stop, sorted(ABBREVIATIONS), Chunk, NAME, seed)


def compiled() -> CompiledChunk | None:
    """The compiled core's entry point, configured, or None when it is not built or the
    switch is off (:mod:`worker.chunking._native`)."""
    core = native.core("_adaptive_core", _configure)
    return None if core is None else cast(CompiledChunk, core.chunk)


NATIVE_MAX_CHARS = 1 << 29
"""Longer texts take the Python path (the core packs word indices into 30 bits)."""


class AdaptiveChunker:
    """Density-driven sizes over ``sentence``'s units and packing; see the module docstring."""

    def __init__(
        self,
        *,
        base_size: int | None = None,
        min_size: int | None = None,
        max_size: int | None = None,
        overlap: int | None = None,
        technical_threshold: float = 0.5,
        language: str = "auto",
        tokenizer: str | None = None,
        sizing: Sizing | None = None,
    ) -> None:
        settings = {
            "base_size": base_size,
            "min_size": min_size,
            "max_size": max_size,
            "overlap": overlap,
            "technical_threshold": technical_threshold,
            "language": language,
            "tokenizer": tokenizer,
        }
        try:
            given = msgspec.convert(settings, AdaptiveParams)
        except msgspec.ValidationError as exc:
            raise ValueError(str(exc)) from exc
        self.sizing = own_sizing(tokenizer) if sizing is None else sizing
        defaults = self.sizing.adaptive_defaults()
        cap = self.sizing.cap(given.max_size, characters=defaults.max_size or 0)
        smallest = given.min_size
        if smallest is None:
            smallest = min(defaults.min_size, cap)
        _check_order(smallest, cap)
        base = defaults.base_size if given.base_size is None else given.base_size
        overlap = defaults.overlap if given.overlap is None else given.overlap
        self._resolved = (base, smallest, cap, overlap)
        self.params = msgspec.structs.replace(
            given, base_size=base, min_size=smallest, max_size=cap, overlap=overlap
        )
        """The parameters with every size resolved in the unit (``max_size``: the hard cap)."""
        room = min(overlap, cap // 4)
        self.sizes = Sizes(cap - room, max(1, cap // 8))
        """Packing's sizes: the chunk's own units leave room for the overlap (at most a quarter
        of the cap) in front of them; the minimum is an eighth of the cap."""
        self.characters = self.sizing.character_cap(cap)
        """The hard cap in characters beside the cap in tokens (None in characters)."""

    @property
    def resolved(self) -> AdaptiveParams:
        """The parameters with the unset sizes as this chunker resolved them in its unit."""
        return self.params

    @classmethod
    def from_params(cls, params: AdaptiveParams, sizing: Sizing | None = None) -> AdaptiveChunker:
        return cls(
            base_size=params.base_size,
            min_size=params.min_size,
            max_size=params.max_size,
            overlap=params.overlap,
            technical_threshold=params.technical_threshold,
            language=params.language,
            tokenizer=params.tokenizer,
            sizing=sizing,
        )

    def _sizes(self) -> tuple[int, int, int, int]:
        """base_size, min_size, max_size, overlap, resolved."""
        return self._resolved

    def target_size(self, local_density: float) -> int:
        _, smallest, cap, _ = self._sizes()
        return round(cap - local_density * (cap - smallest))

    def chunk_sizes(self, target: int) -> Sizes:
        """The sizes of a chunk whose density target is ``target``: its target at least the
        minimum, its soft cap a third above the target, at most the hard cap."""
        minimum = self.sizes.minimum
        return Sizes(min(self.sizes.cap, max(target, minimum) * 4 // 3), minimum)

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
        core, measured = compiled(), native.measured_by(self.sizing.counter)
        if core is None or measured is None or len(text) >= NATIVE_MAX_CHARS:
            return self.chunk_reference(text, doc_id, source)
        p = self.params
        chunks = core(
            text,
            self._sizes(),
            p.language != "en",
            ARABIC_COMPLEX_MIN_LETTERS,
            p.technical_threshold,
            _identity(doc_id, source),
            p.language,
            *measured,
        )
        if chunks is None:
            return self.chunk_reference(text, doc_id, source)
        return self._capped(text, chunks)

    def _capped(self, text: str, chunks: list[Chunk]) -> list[Chunk]:
        """``chunks`` within the character cap; a piece's ``char_count`` is its own."""
        return cap_chunks(text, chunks, self.characters, self._sizes()[2], _counted)

    def chunk_reference(
        self,
        text: str,
        doc_id: str = "",
        source: str = "",
        *,
        content_type: ContentType = "text/plain",
    ) -> list[Chunk]:
        """The pure-Python definition of :meth:`chunk` (the compiled core's twin)."""
        p = self.params
        base_size, _, cap, overlap = self._sizes()
        sizes = self.sizes
        measure = Measure(text, self.sizing.counter)
        units = read_units(text, measure, sizes.limit, cap, clauses=p.language != "en")
        if not units.starts:
            return []
        sections = _Sections(text, fence_lines(text))
        profile = DocumentProfile(text)
        local: dict[int, tuple[float, int]] = {}

        def density_at(first: int) -> tuple[float, int]:
            """The local density and the target of a chunk starting at unit ``first``."""
            found = local.get(first)
            if found is None:
                start = units.starts[first]
                end = min(measure.advance(start, base_size), sections.end(start))
                value = profile.density(start, end)
                found = local[first] = (value, self.target_size(value))
            return found

        groups = pack(
            units, sizes, chunk_sizes=lambda first: self.chunk_sizes(density_at(first)[1])
        )
        starts = carried_starts(groups, units, overlap, cap)
        extra = _identity(doc_id, source)
        language = detect_language(text) if p.language == "auto" else p.language
        threshold = p.technical_threshold
        chunks: list[Chunk] = []
        for index, ((first, last), carried) in enumerate(zip(groups, starts, strict=True)):
            start, end = units.starts[carried], units.ends[last]
            value, target = density_at(first)
            metadata: dict[str, object] = {
                "chunk_index": index,
                "density": profile.document_density,
                "local_density": value,
                "target_size": target,
                "technical": value >= threshold,
                "content_type": content_kind(
                    sections.in_code(units.starts[first]), value, threshold
                ),
                "char_count": end - start,
                "language": language,
            }
            if extra:
                metadata.update(extra)
            size = units.before_end[last] - units.before_start[carried]
            chunks.append(Chunk(text[start:end], start, end, size, NAME, metadata))
        return self._capped(text, chunks)


def _counted(metadata: Metadata, text: str) -> Metadata:
    metadata["char_count"] = len(text)
    return metadata


def carried_starts(
    groups: list[tuple[int, int]], units: Units, overlap: int, cap: int
) -> list[int]:
    """The unit each chunk starts at: its first, or the first of its predecessor's trailing
    units that it repeats. Those are the most units, at most ``overlap`` together, that end
    the chunk before (never its first), keep the chunk within ``cap``, and start after a gap
    where a chunk may start (a line break or stronger, not glue: a heading's text or what a
    ``:`` line introduces is not carried without it)."""
    starts = []
    before_start, before_end, levels = units.before_start, units.before_end, units.levels
    for k, (first, last) in enumerate(groups):
        start = first
        if k and overlap > 0:
            j, floor = first - 1, groups[k - 1][0]
            while j > floor:
                if before_end[first - 1] - before_start[j] > overlap:
                    break
                if before_end[last] - before_start[j] > cap:
                    break
                if levels[j] >= LINE and levels[j] != GLUE:
                    start = j
                j -= 1
        starts.append(start)
    return starts


def content_kind(in_code: bool, local_density: float, technical_threshold: float) -> str:
    """The design's naming of a chunk's content: ``code`` inside a fenced code section,
    ``technical`` at or above the technical threshold, ``prose`` below it."""
    if in_code:
        return "code"
    return "technical" if local_density >= technical_threshold else "prose"


def _identity(doc_id: str, source: str) -> dict[str, object]:
    """The metadata every chunk of a document carries: its id and source, when given."""
    extra: dict[str, object] = {}
    if doc_id:
        extra["doc_id"] = doc_id
    if source:
        extra["source"] = source
    return extra


class _Sections:
    """Code-fence sections: where the section holding an offset ends, and whether it is code.

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

    def end(self, start: int) -> int:
        return self.stops[bisect_right(self.fences, start)]

    def in_code(self, start: int) -> bool:
        """Whether ``start`` lies in a fenced code section (its fence line included)."""
        return bisect_right(self.fences, start) % 2 == 1
