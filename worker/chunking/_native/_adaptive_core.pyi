from collections.abc import Callable, Iterable

from worker.chunking.types import Chunk

def configure(
    classes: bytes,
    tech_hashes: Iterable[int],
    stop_hashes: Iterable[int],
    abbreviations: Iterable[str],
    chunk_type: type[Chunk],
    name: str,
    seed: int,
    /,
) -> None: ...
def chunk(
    text: str,
    sizes: tuple[int, int, int, int],
    clause_cuts: bool,
    arabic_min_letters: int,
    technical_threshold: float,
    extra_metadata: dict[str, object],
    language: str,
    memory: object | None,
    count_pieces: Callable[[list[str]], list[int]] | None,
    cut_word: Callable[[str, int, int, int], list[tuple[int, int, int]]] | None = None,
    /,
) -> list[Chunk] | None: ...
