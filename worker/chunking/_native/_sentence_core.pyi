from collections.abc import Callable, Iterable
from typing import Any

from worker.chunking.types import Chunk
from worker.wordpiece import WordPieceTables

def configure(abbreviations: Iterable[str], chunk_type: type[Chunk], name: str, /) -> None: ...
def configure_rules(abbreviations: Iterable[str], /) -> None: ...
def new_cache(wordpiece: WordPieceTables | None, /) -> object: ...
def chunk(
    text: str,
    cap: int,
    memory: object | None,
    count_pieces: Callable[[list[str]], list[int]] | None,
    cut_word: Callable[[str, int, int, int], list[tuple[int, int, int]]] | None = None,
    /,
) -> list[Chunk] | None: ...
def count_texts(
    memory: object, texts: list[str], count_pieces: Callable[[list[str]], list[int]], /
) -> list[int]: ...
def wordpiece_counts(memory: object, pieces: list[str], /) -> list[int | None]: ...
def new_id_memory(wordpiece: WordPieceTables | None, limit: int = ..., /) -> object: ...
def static_sums(
    memory: object,
    texts: list[str],
    ids_of_pieces: Callable[[list[str]], list[bytes]],
    max_length: int,
    unknown: int,
    matrix: Any,
    mapping: Any,
    weights: Any,
    out: Any,
    /,
) -> list[int]: ...
def wordpiece_ids(memory: object, pieces: list[str], /) -> list[list[int] | None]: ...
def sentences(text: str, start: int, end: int, clauses: bool, /) -> list[int]: ...
