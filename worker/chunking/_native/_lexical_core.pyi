"""The compiled core of the `lexical` strategy (worker/chunking/_native/_lexical_core.c)."""

from collections.abc import Callable, Iterable, Mapping, Sequence

from worker.chunking.types import Chunk

def configure(
    *,
    chunk_type: type[Chunk],
    strategy: str,
    reasons: Sequence[str],
    openings: Sequence[Sequence[str]],
    standalone: Mapping[str, str],
    heading_type: str,
    prose_type: str,
    stop_words: Iterable[str],
    abbreviations: Iterable[str],
    max_chars: int,
    short_paragraph_chars: int,
    lead_in_max_chars: int,
    keyword_min_letters: int,
    keyword_overlap_min: int,
    list_keyword_overlap_min: int,
    lead_window: int,
) -> None: ...
def chunk(
    text: str,
    doc_id: str,
    source: str,
    cap: int,
    memory: object | None,
    count_pieces: Callable[[list[str]], list[int]] | None,
    cut_word: Callable[[str, int, int, int], list[tuple[int, int, int]]] | None = None,
    /,
) -> list[Chunk] | None: ...
