"""The static model's text vectors, text by text, against the batch statement they replaced:
every token row gathered for the whole batch, cast to float64, summed per text with one
``np.add.reduceat`` and divided by the token count. Bit for bit, with and without model2vec's
vocabulary quantisation (mapping and weights), normalised or not, empty texts included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.models.static import StaticEmbedder, StaticModel

VOCAB = 97


def batch_statement(model: StaticModel, ids: list[np.ndarray[Any, Any]]) -> np.ndarray[Any, Any]:
    out = np.zeros((len(ids), model.dimension), dtype=np.float64)
    lengths = np.array([len(row) for row in ids], dtype=np.int64)
    filled = np.flatnonzero(lengths)
    if len(filled):
        flat = np.concatenate([ids[i] for i in filled])
        rows = model.matrix[flat if model.mapping is None else model.mapping[flat]]
        gathered = rows.astype(np.float64)
        if model.weights is not None:
            gathered *= model.weights[flat][:, None]
        starts = np.concatenate(([0], np.cumsum(lengths[filled])[:-1]))
        out[filled] = np.add.reduceat(gathered, starts, axis=0) / lengths[filled][:, None]
    if model.normalize:
        out /= np.linalg.norm(out, axis=1, keepdims=True) + 1e-32
    return out.astype(np.float32)


def model_of(dim: int, quantised: bool, normalize: bool, seed: int) -> StaticModel:
    rng = np.random.default_rng(seed)
    rows = VOCAB // 3 if quantised else VOCAB
    return StaticModel(
        directory=Path("."),
        matrix=(rng.standard_normal((rows, dim)) * rng.uniform(1e-3, 1e3)).astype(np.float32),
        mapping=rng.integers(0, rows, VOCAB).astype(np.int64) if quantised else None,
        weights=rng.uniform(0.01, 3, VOCAB).astype(np.float32) if quantised else None,
        tokenizer=None,  # type: ignore[arg-type]  # embed_ids never tokenises
        unk_id=None,
        normalize=normalize,
        max_length=512,
        max_chars=None,
        identity="test",
    )


@pytest.mark.parametrize("dim", [1, 2, 7, 256])
@pytest.mark.parametrize("quantised", [False, True])
@pytest.mark.parametrize("normalize", [False, True])
@settings(max_examples=40, deadline=None)
@given(
    texts=st.lists(st.lists(st.integers(0, VOCAB - 1), max_size=600), max_size=12),
    seed=st.integers(0, 2**32 - 1),
)
def test_text_by_text_sums_equal_the_batch_statement(
    dim: int, quantised: bool, normalize: bool, texts: list[list[int]], seed: int
) -> None:
    model = model_of(dim, quantised, normalize, seed)
    ids = [np.array(t, dtype=np.int64) for t in texts]
    got = StaticEmbedder(model).embed_ids(ids)
    assert got.dtype == np.float32
    assert got.shape == (len(ids), dim)
    assert np.array_equal(got, batch_statement(model, ids))
