"""Static embedding models: one vector per vocabulary token, a text's vector the mean of its rows.

Invariants:

* The directory is in model2vec's layout: ``model.safetensors`` with the ``[vocab, dim]``
  float matrix ``embeddings`` (optionally model2vec's vocabulary quantisation: ``mapping``
  token id → row and ``weights`` per token id), ``tokenizer.json`` and ``config.json``
  (``normalize``, default false; ``max_length`` in tokens, default 512, null for none). So a
  model saved by model2vec loads here, and one written here loads in model2vec, with the same
  vectors (tests check both ways against the real library).
* A text's tokens are the tokenizer's ids *without* special tokens, the unknown token dropped,
  at most ``max_length`` of them (the text first cut at ``max_length`` × the vocabulary's median
  token length in characters), exactly as model2vec's ``encode``.
* A text without tokens (empty, whitespace, only unknown characters) gets the zero vector, never
  NaN; normalisation divides by ``norm + 1e-32``, so the zero vector stays zero.
* Loading needs numpy and tokenizers only (no model2vec, torch or safetensors); every problem
  with the directory is found at load time and named in one line (:class:`StaticModelError`).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from tokenizers import Tokenizer

from worker.models.piece_ids import PieceIds
from worker.models.static_layout import (
    CONFIG_FILE,
    MATRIX_FILE,
    MATRIX_TENSOR,
    TOKENIZER_FILE,
    StaticModelError,
    max_length_of,
    normalize_of,
    read_config,
    static_identity,
)
from worker.models.tensorfile import TensorFileError, read_tensors

# A static model's rows summed per text in compiled code (worker.chunking._native.static_sums:
# this room may not import the cores, so the worker's loader hands the factory in).
Sums = Callable[[list[str], NDArray[np.float64]], list[int]]
MakeSums = Callable[..., Sums | None]

_NORM_EPS = 1e-32  # model2vec's: keeps an all-zero mean at zero instead of NaN
_ID_CACHE_SIZE = 16384  # token ids measured by token_lengths and not yet embedded


@dataclass(frozen=True)
class StaticModel:
    """A loaded static model: the matrix, how token ids map to rows, and the tokenizer."""

    directory: Path
    matrix: NDArray[np.float32]  # [rows, dim]
    mapping: NDArray[np.int64] | None  # token id → row (vocabulary quantisation), else identity
    weights: NDArray[np.float32] | None  # per token id, multiplies its row
    tokenizer: Tokenizer
    unk_id: int | None
    normalize: bool
    max_length: int | None
    max_chars: int | None  # texts are cut to this many characters before tokenising
    identity: str

    @property
    def dimension(self) -> int:
        return int(self.matrix.shape[1])


def load_static_model(directory: Path) -> StaticModel:
    """Read and check a static model directory (raises :class:`StaticModelError`)."""
    if not directory.is_dir():
        raise StaticModelError(f"{str(directory)!r} is not a directory")
    for name in (MATRIX_FILE, TOKENIZER_FILE, CONFIG_FILE):
        if not (directory / name).is_file():
            raise StaticModelError(f"{directory} has no {name} (a static model needs all three)")
    config = read_config(directory)
    try:
        tensors = read_tensors(directory / MATRIX_FILE)
    except (OSError, TensorFileError) as exc:
        raise StaticModelError(str(exc)) from exc
    if MATRIX_TENSOR not in tensors:
        raise StaticModelError(
            f"{directory / MATRIX_FILE} has no {MATRIX_TENSOR!r} tensor (found {sorted(tensors)})"
        )
    raw = tensors[MATRIX_TENSOR]
    if raw.ndim != 2 or raw.shape[0] == 0 or raw.shape[1] == 0:
        raise StaticModelError(
            f"{directory / MATRIX_FILE}: {MATRIX_TENSOR!r} has shape {list(raw.shape)}, "
            "expected [vocabulary, dimension]"
        )
    if not (np.issubdtype(raw.dtype, np.floating) or raw.dtype == np.int8):
        raise StaticModelError(f"{directory / MATRIX_FILE}: {MATRIX_TENSOR!r} is {raw.dtype}")
    matrix = np.ascontiguousarray(raw, dtype=np.float32)
    if not np.isfinite(matrix).all():
        raise StaticModelError(f"{directory / MATRIX_FILE}: {MATRIX_TENSOR!r} holds NaN or inf")

    try:
        tokenizer = Tokenizer.from_file(str(directory / TOKENIZER_FILE))
    except Exception as exc:  # the tokenizers library raises plain Exceptions
        raise StaticModelError(f"cannot read {directory / TOKENIZER_FILE}: {exc}") from exc
    vocab = tokenizer.get_vocab_size(with_added_tokens=True)
    mapping = _mapping(tensors, vocab, len(matrix), directory)
    weights = _weights(tensors, vocab, directory)
    if mapping is None and len(matrix) != vocab:
        raise StaticModelError(
            f"{directory}: the matrix has {len(matrix)} rows but {TOKENIZER_FILE} has {vocab} "
            "tokens (tokenizer and matrix do not belong together)"
        )

    max_length = max_length_of(config)
    tokenizer.no_padding()
    if max_length is None:
        tokenizer.no_truncation()
    else:
        tokenizer.enable_truncation(max_length=max_length)
    return StaticModel(
        directory=directory,
        matrix=matrix,
        mapping=mapping,
        weights=weights,
        tokenizer=tokenizer,
        unk_id=_unk_id(tokenizer),
        normalize=normalize_of(config),
        max_length=max_length,
        max_chars=None if max_length is None else max_length * _median_token_chars(tokenizer),
        identity=static_identity(directory),
    )


class StaticEmbedder:
    """The :class:`~worker.models.backend.EmbeddingBackend` of a static model.

    ``embed`` is a table lookup and a mean: no session, no threads of its own; safe to call from
    several threads at once (the model is read-only; the id cache has a lock)."""

    # Its cost is the real tokens' rows, whatever the batch: the batcher embeds its requests as
    # they come instead of queueing and packing them (worker.inference.batcher.DIRECT_INLINE_CHARS).
    packing_pays = False

    def __init__(self, model: StaticModel) -> None:
        self.model = model
        self._pieces: PieceIds | None = None  # made on the first tokenization
        self._measured: OrderedDict[str, NDArray[np.int64]] = OrderedDict()
        self._lock = threading.Lock()
        self._sums: Sums | None = None  # the compiled rows, when use_compiled() found them
        self._sums_lock = threading.Lock()  # one compiled call at a time (its memory)

    @classmethod
    def load(cls, directory: Path) -> StaticEmbedder:
        return cls(load_static_model(directory))

    @property
    def dimension(self) -> int:
        return self.model.dimension

    @property
    def identity(self) -> str:
        return self.model.identity

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        ids = self._tokenize(texts)
        with self._lock:
            for text, row in zip(texts, ids, strict=True):
                self._measured[text] = row
            while len(self._measured) > _ID_CACHE_SIZE:
                self._measured.popitem(last=False)
        # A text without tokens still takes a row of the batch.
        return [max(1, len(row)) for row in ids]

    def use_compiled(self, make: MakeSums) -> bool:
        """Sum rows with ``make``'s compiled function from now on (the same vectors, bit for
        bit: tests/models/test_static_rows.py); False when there is none for this model (the
        cores are not built, or the tokenizer's ids do not add up at whitespace)."""
        model = self.model
        pieces = self._piece_ids()
        if not pieces.additive:
            return False
        self._sums = make(
            pieces.wordpiece_tables(),
            pieces.piece_ids,
            model.matrix,
            model.mapping,
            model.weights,
            model.max_length,
            model.unk_id,
        )
        return self._sums is not None

    @property
    def compiled(self) -> bool:
        """Whether the rows are summed by the compiled function (:meth:`use_compiled`)."""
        return self._sums is not None

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        return self.embed_measured(texts)[0]

    def embed_measured(self, texts: Sequence[str]) -> tuple[NDArray[np.float32], list[int]]:
        """The vectors of ``texts`` and their token lengths (as :meth:`token_lengths`), from one
        tokenization."""
        sums = self._sums
        if sums is None:
            ids = self._ids(texts)
            return self.embed_ids(ids), [max(1, len(row)) for row in ids]
        model = self.model
        if self._measured:  # measured before: the compiled path does not need their ids
            with self._lock:
                for text in texts:
                    self._measured.pop(text, None)
        cut = [t[: model.max_chars] for t in texts] if model.max_chars is not None else list(texts)
        out = np.zeros((len(cut), model.dimension), dtype=np.float64)
        with self._sums_lock:
            counts = sums(cut, out)
        declined = [i for i, count in enumerate(counts) if count < 0]
        if declined:  # whitespace the pieces rule does not cover: tokenized whole, in Python
            ids = self._tokenize([texts[i] for i in declined])
            self._sum_rows(ids, out, declined)
            for i, row in zip(declined, ids, strict=True):
                counts[i] = len(row)
        return self._finish(out), [max(1, count) for count in counts]

    def embed_ids(self, ids: Sequence[NDArray[np.int64]]) -> NDArray[np.float32]:
        """Vectors of already tokenised texts (ids as :meth:`tokenize` makes them)."""
        out = np.zeros((len(ids), self.model.dimension), dtype=np.float64)
        self._sum_rows(ids, out, range(len(ids)))
        return self._finish(out)

    def _sum_rows(
        self, ids: Sequence[NDArray[np.int64]], out: NDArray[np.float64], at: Sequence[int]
    ) -> None:
        """The mean of each text's rows, in float64, into ``out[at[i]]``."""
        model = self.model
        matrix, mapping, weights = model.matrix, model.mapping, model.weights
        # Summed in float64: over hundreds of tokens a float32 sum drifts (model2vec's own
        # float32 mean of many copies of one row is off the row; this is exact).
        # Text by text: a text's rows (at most max_length of them) stay in the cache while they
        # are summed. Gathering a whole batch's rows first and summing them in one reduceat
        # walked [tokens, dim] float64 arrays through memory twice, and was slower for the same
        # sums in the same order (bench/static_bench.py; docs/benchmarks.md).
        for i, row in zip(at, ids, strict=True):
            count = len(row)
            if not count:
                continue  # no tokens: the zero vector
            rows = matrix[row if mapping is None else mapping[row]]
            if weights is None:
                np.add.reduce(rows, axis=0, dtype=np.float64, out=out[i])
            else:
                gathered = rows.astype(np.float64)
                gathered *= weights[row][:, None]
                np.add.reduce(gathered, axis=0, out=out[i])
            out[i] /= count

    def _finish(self, out: NDArray[np.float64]) -> NDArray[np.float32]:
        """Normalised when the model says so, as float32."""
        if self.model.normalize:
            out /= np.linalg.norm(out, axis=1, keepdims=True) + _NORM_EPS
        return out.astype(np.float32)

    def _ids(self, texts: Sequence[str]) -> list[NDArray[np.int64]]:
        found: list[NDArray[np.int64] | None] = []
        with self._lock:
            for text in texts:
                found.append(self._measured.pop(text, None))
        missing = [i for i, row in enumerate(found) if row is None]
        if missing:
            fresh = self._tokenize([texts[i] for i in missing])
            for i, row in zip(missing, fresh, strict=True):
                found[i] = row
        return [row for row in found if row is not None]

    def _tokenize(self, texts: Sequence[str]) -> list[NDArray[np.int64]]:
        model = self.model
        cut = [t[: model.max_chars] for t in texts] if model.max_chars is not None else texts
        unk = model.unk_id
        # Most words were seen before: their ids come from the piece memory, joined
        # (worker.models.piece_ids), not from a new tokenization.
        ids = self._piece_ids().ids(cut)
        if unk is not None:
            for i, row in enumerate(ids):
                if unk in row:  # rare: filter only the texts that have one
                    ids[i] = row[row != unk]
        return ids

    def _piece_ids(self) -> PieceIds:
        pieces = self._pieces
        if pieces is None:
            pieces = self._pieces = PieceIds(self.model.tokenizer, self.model.max_length)
        return pieces


def _mapping(
    tensors: dict[str, NDArray[np.generic]], vocab: int, rows: int, directory: Path
) -> NDArray[np.int64] | None:
    mapping = tensors.get("mapping")
    if mapping is None:
        return None
    if mapping.shape != (vocab,) or not np.issubdtype(mapping.dtype, np.integer):
        raise StaticModelError(
            f"{directory / MATRIX_FILE}: 'mapping' has shape {list(mapping.shape)} "
            f"({mapping.dtype}), expected [{vocab}] integers (one per token)"
        )
    mapped = mapping.astype(np.int64)
    if len(mapped) and (mapped.min() < 0 or mapped.max() >= rows):
        raise StaticModelError(f"{directory / MATRIX_FILE}: 'mapping' points outside the matrix")
    return mapped


def _weights(
    tensors: dict[str, NDArray[np.generic]], vocab: int, directory: Path
) -> NDArray[np.float32] | None:
    weights = tensors.get("weights")
    if weights is None:
        return None
    if weights.shape != (vocab,) or not np.issubdtype(weights.dtype, np.floating):
        raise StaticModelError(
            f"{directory / MATRIX_FILE}: 'weights' has shape {list(weights.shape)}, "
            f"expected [{vocab}] floats (one per token)"
        )
    return weights.astype(np.float32)


def _unk_id(tokenizer: Tokenizer) -> int | None:
    """The unknown token's id, dropped from every text as model2vec does."""
    model = json.loads(tokenizer.to_str())["model"]
    token = model.get("unk_token")
    if token is not None:
        found = tokenizer.token_to_id(token)
        return None if found is None else int(found)
    unk = model.get("unk_id")  # Unigram models name the id directly
    return None if unk is None else int(unk)


def _median_token_chars(tokenizer: Tokenizer) -> int:
    """Median length in characters of the vocabulary's tokens (model2vec's pre-cut factor)."""
    vocab = tokenizer.get_vocab(with_added_tokens=True)
    return int(np.median([len(token) for token in vocab]))
