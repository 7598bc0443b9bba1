"""Static models: the model2vec format both ways against the real model2vec library, the
safetensors reader/writer against the real safetensors library, bad directories, empty texts."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from safetensors.numpy import load_file, save_file
from tokenizers import Tokenizer

from tests.support.embedding import embed_batch
from worker.model_making.static_write import write_static_model
from worker.models.backend import EmbeddingBackend
from worker.models.loading import load_backend
from worker.models.manifest import ManifestError
from worker.models.reference import describe
from worker.models.static import StaticEmbedder, load_static_model
from worker.models.static_layout import StaticModelError
from worker.models.tensorfile import TensorFileError, read_tensors, write_tensors

TEXTS = [
    "Kafka partitions are consumed by one member of the group at a time.",
    "",  # no tokens at all
    "   \n\t ",
    "\u2603\u2603 snowmen",  # characters the vocabulary has no piece for
    "Résumé of the naïve café owner's œuvre.",
    "word " * 700,  # beyond model2vec's 512-token window: cut there
    "Chunk ids are deterministic: document id, version, strategy, parameters and index.",
]
LONG = 5


@pytest.fixture(scope="module")
def tokenizer_path(source_dir: Path) -> Path:
    return source_dir / "tokenizer.json"


@pytest.fixture(scope="module")
def matrix(tokenizer_path: Path) -> np.ndarray:
    vocab = Tokenizer.from_file(str(tokenizer_path)).get_vocab_size(with_added_tokens=True)
    return np.random.default_rng(12).standard_normal((vocab, 24)).astype(np.float32)


@pytest.mark.parametrize("normalize", [True, False])
def test_model2vec_saved_model_loads_with_the_same_vectors(
    tmp_path: Path, tokenizer_path: Path, matrix: np.ndarray, normalize: bool
) -> None:
    from model2vec import StaticModel

    theirs = StaticModel(
        vectors=matrix, tokenizer=Tokenizer.from_file(str(tokenizer_path)), normalize=normalize
    )
    theirs.save_pretrained(tmp_path / "m2v")
    expected = theirs.encode(TEXTS, use_multiprocessing=False)

    ours = StaticEmbedder.load(tmp_path / "m2v")
    got = ours.embed(TEXTS)
    assert got.shape == expected.shape == (len(TEXTS), 24)
    usual = [i for i in range(len(TEXTS)) if i != LONG]
    np.testing.assert_allclose(got[usual], expected[usual], atol=1e-6, rtol=0)
    # 512 copies of one token: the exact answer is that token's row. model2vec's float32 mean
    # lands 1.4e-6 off it; ours (float64 sums) on it.
    row = matrix[Tokenizer.from_file(str(tokenizer_path)).token_to_id("word")].astype(np.float64)
    exact = row / np.linalg.norm(row) if normalize else row
    np.testing.assert_allclose(got[LONG], exact, atol=1e-6, rtol=0)
    np.testing.assert_allclose(got[LONG], expected[LONG], atol=1e-5, rtol=0)
    assert not np.isnan(got).any()
    assert np.all(got[1] == 0)
    assert np.all(got[2] == 0)
    if normalize:
        norms = np.linalg.norm(got[[0, 4, 5, 6]], axis=1)
        np.testing.assert_allclose(norms, 1.0, atol=1e-6)
    # A foreign directory is recognised by its files, and has an identity of its own.
    assert describe(tmp_path / "m2v", "boundary").kind == "static"
    assert describe(tmp_path / "m2v", "boundary").identity == ours.identity[:16]


def test_directory_written_here_loads_in_model2vec_with_the_same_vectors(
    tmp_path: Path, tokenizer_path: Path, matrix: np.ndarray
) -> None:
    from model2vec import StaticModel

    directory = tmp_path / "ours"
    directory.mkdir()
    write_static_model(directory, matrix, tokenizer_path.read_bytes(), normalize=True)
    theirs = StaticModel.from_pretrained(directory)
    assert theirs.normalize is True
    expected = theirs.encode(TEXTS, use_multiprocessing=False)
    got = load_backend(describe(directory, "boundary")).embed(TEXTS)
    usual = [i for i in range(len(TEXTS)) if i != LONG]
    np.testing.assert_allclose(got[usual], expected[usual], atol=1e-6, rtol=0)
    np.testing.assert_allclose(got[LONG], expected[LONG], atol=1e-5, rtol=0)
    np.testing.assert_array_equal(theirs.embedding, matrix)


def test_vocabulary_quantised_model2vec_model(
    tmp_path: Path, tokenizer_path: Path, matrix: np.ndarray
) -> None:
    """model2vec's mapping + weights tensors (several tokens share a row, each scaled)."""
    from model2vec import StaticModel

    rows = matrix[:500]
    mapping = np.arange(len(matrix), dtype=np.int64) % 500
    weights = np.linspace(0.5, 1.5, len(matrix)).astype(np.float32)
    theirs = StaticModel(
        vectors=rows,
        tokenizer=Tokenizer.from_file(str(tokenizer_path)),
        normalize=True,
        weights=weights,
        token_mapping=mapping,
    )
    theirs.save_pretrained(tmp_path / "q")
    expected = theirs.encode(TEXTS[:LONG], use_multiprocessing=False)
    got = StaticEmbedder.load(tmp_path / "q").embed(TEXTS[:LONG])
    np.testing.assert_allclose(got, expected, atol=1e-6, rtol=0)


def test_backend_protocol_and_batcher_packing(
    tmp_path: Path, tokenizer_path: Path, matrix: np.ndarray
) -> None:
    directory = tmp_path / "m"
    directory.mkdir()
    write_static_model(directory, matrix, tokenizer_path.read_bytes())
    embedder = StaticEmbedder.load(directory)
    assert isinstance(embedder, EmbeddingBackend)
    lengths = embedder.token_lengths(TEXTS)
    assert lengths[1] == 1
    assert lengths[0] > 5
    many = TEXTS * 40
    batched = embed_batch(embedder, many, max_batch_size=7)
    np.testing.assert_array_equal(batched, np.tile(embedder.embed(TEXTS), (40, 1)))
    # Independent check of one row: mean of the rows of its ids, then unit length.
    plain = Tokenizer.from_file(str(tokenizer_path))
    plain.no_padding()  # MiniLM's tokenizer.json pads to 128
    ids = plain.encode(TEXTS[0], add_special_tokens=False).ids
    expected = matrix[ids].astype(np.float64).mean(axis=0)
    np.testing.assert_allclose(batched[0], expected / np.linalg.norm(expected), atol=1e-6)


def test_written_bytes_are_deterministic(
    tmp_path: Path, tokenizer_path: Path, matrix: np.ndarray
) -> None:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        write_static_model(tmp_path / name, matrix, tokenizer_path.read_bytes())
    for file in ("model.safetensors", "config.json", "tokenizer.json"):
        assert (tmp_path / "a" / file).read_bytes() == (tmp_path / "b" / file).read_bytes()


def test_tensor_files_against_the_safetensors_library(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    tensors: dict[str, NDArray[Any]] = {
        "embeddings": rng.standard_normal((7, 5)).astype(np.float32),
        "mapping": np.arange(9, dtype=np.int64),
        "half": rng.standard_normal(3).astype(np.float16),
        "scalar": np.array(2.5, dtype=np.float64),
    }
    write_tensors(tmp_path / "ours.safetensors", tensors)
    theirs = load_file(str(tmp_path / "ours.safetensors"))
    assert set(theirs) == set(tensors)
    for name, array in tensors.items():
        np.testing.assert_array_equal(theirs[name], array)
        assert theirs[name].dtype == array.dtype

    save_file(tensors, str(tmp_path / "theirs.safetensors"))
    ours = read_tensors(tmp_path / "theirs.safetensors")
    for name, array in tensors.items():
        np.testing.assert_array_equal(ours[name], array)
        assert ours[name].shape == array.shape


def test_truncated_tensor_file_is_refused(tmp_path: Path) -> None:
    write_tensors(tmp_path / "t.safetensors", {"embeddings": np.ones((4, 4), np.float32)})
    data = (tmp_path / "t.safetensors").read_bytes()
    (tmp_path / "t.safetensors").write_bytes(data[:-4])
    with pytest.raises(TensorFileError, match="offsets"):
        read_tensors(tmp_path / "t.safetensors")


def _model_dir(tmp_path: Path, tokenizer_path: Path, matrix: np.ndarray) -> Path:
    directory = tmp_path / "static"
    directory.mkdir()
    write_static_model(directory, matrix, tokenizer_path.read_bytes())
    return directory


def test_missing_matrix(tmp_path: Path, tokenizer_path: Path, matrix: np.ndarray) -> None:
    directory = _model_dir(tmp_path, tokenizer_path, matrix)
    (directory / "model.safetensors").unlink()
    with pytest.raises(StaticModelError, match=r"no model\.safetensors"):
        load_static_model(directory)


def test_matrix_of_the_wrong_shape(
    tmp_path: Path, tokenizer_path: Path, matrix: np.ndarray
) -> None:
    directory = _model_dir(tmp_path, tokenizer_path, matrix)
    write_tensors(directory / "model.safetensors", {"embeddings": matrix[:, 0].copy()})
    with pytest.raises(
        StaticModelError, match=r"shape \[\d+\], expected \[vocabulary, dimension\]"
    ):
        load_static_model(directory)


def test_tokenizer_and_matrix_that_do_not_belong_together(
    tmp_path: Path, tokenizer_path: Path, matrix: np.ndarray
) -> None:
    directory = _model_dir(tmp_path, tokenizer_path, matrix[:1000])
    with pytest.raises(StaticModelError, match=r"1000 rows but tokenizer\.json has 30522 tokens"):
        load_static_model(directory)


def test_matrix_tensor_under_another_name(
    tmp_path: Path, tokenizer_path: Path, matrix: np.ndarray
) -> None:
    directory = _model_dir(tmp_path, tokenizer_path, matrix)
    write_tensors(directory / "model.safetensors", {"vectors": matrix})
    with pytest.raises(StaticModelError, match="no 'embeddings' tensor"):
        load_static_model(directory)


def test_a_directory_with_nothing_is_no_model(tmp_path: Path) -> None:

    with pytest.raises(ManifestError, match="holds no model"):
        load_backend(describe(tmp_path, "boundary"))


def test_identity_follows_what_determines_the_vectors(
    tmp_path: Path, tokenizer_path: Path, matrix: np.ndarray
) -> None:
    directory = _model_dir(tmp_path, tokenizer_path, matrix)
    first = identity_of(directory)
    copy = tmp_path / "copy"
    shutil.copytree(directory, copy)
    assert identity_of(copy) == first  # the place does not matter
    write_static_model(copy, matrix, tokenizer_path.read_bytes(), normalize=False)
    assert identity_of(copy) != first  # normalisation changes the vectors
    changed = matrix.copy()
    changed[100, 0] += 1.0
    write_static_model(copy, changed, tokenizer_path.read_bytes())
    assert identity_of(copy) != first


@pytest.mark.parametrize(
    ("breakage", "expected"),
    [
        ("missing matrix", r"no model\.safetensors"),
        ("wrong shape", r"expected \[vocabulary, dimension\]"),
        ("vocabulary mismatch", r"rows but tokenizer\.json has 30522 tokens"),
    ],
)
async def test_worker_refuses_a_bad_static_model_at_start_up(
    tmp_path: Path, tokenizer_path: Path, matrix: np.ndarray, breakage: str, expected: str
) -> None:
    """One line naming the setting, before any broker is contacted (none listens here)."""
    from worker.app import Worker
    from worker.config import load_settings
    from worker.errors import ConfigError

    directory = _model_dir(tmp_path, tokenizer_path, matrix)
    if breakage == "missing matrix":
        (directory / "model.safetensors").unlink()
    elif breakage == "wrong shape":
        write_tensors(directory / "model.safetensors", {"embeddings": matrix[:, 0].copy()})
    else:
        write_tensors(directory / "model.safetensors", {"embeddings": matrix[:999]})
    settings = load_settings(
        {
            "bootstrap_servers": "127.0.0.1:9",
            "input_topic": "in",
            "output_topic": "out",
            "dlq_topic": "dlq",
            "group_id": "g",
            "strategy": "semantic",
            "model_dir": str(directory),
        },
        env={},
    )
    with pytest.raises(ConfigError) as caught:
        await Worker(settings).run()
    message = str(caught.value)
    assert message.startswith("invalid setting CHUNKSTREAM_MODEL_DIR (--model-dir): ")
    assert "\n" not in message
    assert re.search(expected, message)


def identity_of(directory: Path) -> str:
    return describe(directory, "boundary").identity
