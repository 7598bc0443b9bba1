from collections.abc import Iterable

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
    base_size: int,
    min_size: int,
    max_size: int,
    overlap: int,
    clause_cuts: bool,
    arabic_min_letters: int,
    technical_threshold: float,
    extra_metadata: dict[str, object],
    language: str,
    /,
) -> list[Chunk]: ...
