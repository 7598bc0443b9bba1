"""Turning the encoder's views of tokens and sentences into one vector per token (pure numpy).

Invariants: every function is deterministic (no random state; eigenvector signs fixed; ties in
sorting broken by index) and works in float64, so the same inputs give the same bytes. The
pieces, each measured on its own (bench/static_bench.py; docs/benchmarks.md):

* :func:`contextual_means` — each token's average hidden state over the corpus, i.e. the row
  that makes a static mean closest to the encoder's own mean pooling for the contexts seen;
* :func:`blend` — tokens seen rarely (or never) lean on their single-token vector mapped into
  the contextual space by a least-squares linear map;
* :func:`sif_weights` — frequent tokens count less (a / (a + p)), as smooth inverse frequency;
* :func:`fit_ridge` — rows fitted so that a sentence's mean of rows matches the encoder's
  sentence vector, pulled toward a prior matrix (regularised least squares, conjugate gradients);
* :func:`principal_axes` — fewer dimensions: PCA (centred) or the leading axes of the rows as
  they are (uncentred, which keeps the direction every token shares).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

F64 = NDArray[np.float64]


def contextual_means(sums: F64, counts: NDArray[np.int64]) -> F64:
    """Average hidden state per token; zero rows for tokens never seen."""
    seen = counts > 0
    out = np.zeros_like(sums)
    out[seen] = sums[seen] / counts[seen][:, None]
    return out


def linear_map(source: F64, target: F64, *, ridge: float = 1e-3) -> F64:
    """``M`` minimising ``||source @ M - target||²`` (+ a small ridge for conditioning)."""
    gram = np.asarray(source.T @ source, dtype=np.float64)
    gram[np.diag_indices_from(gram)] += ridge * float(np.trace(gram)) / len(gram)
    solved: F64 = np.asarray(np.linalg.solve(gram, source.T @ target), dtype=np.float64)
    return solved


def blend(contextual: F64, counts: NDArray[np.int64], prior: F64, strength: float) -> F64:
    """Per token, ``(n·contextual + k·prior) / (n + k)`` with ``n`` its corpus count."""
    n = counts.astype(np.float64)[:, None]
    out: F64 = (n * contextual + strength * prior) / (n + strength)
    return out


def sif_weights(counts: NDArray[np.int64], a: float) -> F64:
    """``a / (a + p)`` with ``p`` the token's corpus frequency (unseen tokens: weight 1)."""
    p = counts.astype(np.float64) / max(1, int(counts.sum()))
    out: F64 = a / (a + p)
    return out


def principal_axes(matrix: F64, dims: int, *, centre: bool) -> F64:
    """``matrix`` projected on its ``dims`` leading axes: of its covariance when ``centre``
    (the rows minus their mean: PCA), else of its second moment (the rows as they are, so
    the direction all tokens share is kept)."""
    rows = matrix - matrix.mean(axis=0) if centre else matrix
    values, vectors = np.linalg.eigh(rows.T @ rows)
    axes = vectors[:, np.argsort(-values, kind="stable")[:dims]]
    # An eigenvector's sign is arbitrary; fix it so that its largest entry is positive.
    signs = np.sign(axes[np.abs(axes).argmax(axis=0), np.arange(axes.shape[1])])
    projected: F64 = rows @ (axes * signs)
    return projected


@dataclass(frozen=True)
class Sentences:
    """Tokenised sentences as one flat id array, grouped for fast sums in both directions."""

    flat: NDArray[np.int64]  # every sentence's ids, one after another
    lengths: NDArray[np.int64]  # ids per sentence (each > 0)

    @classmethod
    def of(cls, token_ids: Sequence[NDArray[np.int64]]) -> Sentences:
        kept = [ids for ids in token_ids if len(ids)]
        return cls(np.concatenate(kept), np.array([len(ids) for ids in kept], dtype=np.int64))

    @property
    def starts(self) -> NDArray[np.int64]:
        return np.concatenate(([0], np.cumsum(self.lengths)[:-1]))


def fit_ridge(
    sentences: Sentences,
    targets: F64,
    prior: F64,
    *,
    ridge: float,
    iterations: int = 40,
    progress: Callable[[int], None] | None = None,
) -> F64:
    """Rows ``E`` minimising ``Σ_s ||mean(E[s]) - target_s||² + ridge · Σ_v ||E_v - prior_v||²``.

    Tokens the corpus never shows keep their prior row (the minimum for them). Solved by
    conjugate gradients on the normal equations, all columns as one vector; ``iterations``
    bounds the work (the solution changes little after a few dozen)."""
    flat, lengths, starts = sentences.flat, sentences.lengths, sentences.starts
    owner = np.repeat(np.arange(len(lengths)), lengths)
    order = np.argsort(flat, kind="stable")
    tokens, token_starts = np.unique(flat[order], return_index=True)
    inverse_len = 1.0 / lengths[:, None]

    def forward(rows: F64) -> F64:  # rows of the seen tokens → sentence means
        full = np.zeros((len(prior), rows.shape[1]))
        full[tokens] = rows
        means: F64 = np.add.reduceat(full[flat], starts, axis=0) * inverse_len
        return means

    def backward(residual: F64) -> F64:  # sentence residuals → per seen token
        spread = (residual * inverse_len)[owner][order]
        summed: F64 = np.add.reduceat(spread, token_starts, axis=0)
        return summed

    def operator(rows: F64) -> F64:
        out: F64 = backward(forward(rows)) + ridge * rows
        return out

    start = prior[tokens].copy()
    rhs = backward(targets) + ridge * start
    solution = start.copy()
    residual = rhs - operator(solution)
    direction = residual.copy()
    norm = float(np.vdot(residual, residual))
    for _ in range(iterations):
        if norm == 0.0:  # solved exactly
            break
        applied = operator(direction)
        step = norm / float(np.vdot(direction, applied))
        solution += step * direction
        residual -= step * applied
        new_norm = float(np.vdot(residual, residual))
        direction = residual + (new_norm / norm) * direction
        norm = new_norm
        if progress is not None:
            progress(1)
    fitted = prior.copy()
    fitted[tokens] = solution
    return fitted
