"""``chunkstream model distill``: a built ONNX encoder directory → a static model directory.

Invariants: no torch and no model2vec — the encoder runs in onnxruntime, the fitting is numpy
(:mod:`worker.model_making.static_fit`). The training text is the pinned corpus
(:mod:`worker.model_making.training_corpus`), never a benchmark document. Same encoder and corpus →
the same bytes on one machine (length-sorted batches in a fixed order, float64 sums, fixed
eigenvector signs). The output is staged in a sibling temporary directory and renamed into
place, so a reader never sees half a model; ``manifest.json`` is written last.

The recipe (:class:`Recipe`; bench/static_bench.py tries the variants, docs/benchmarks.md
has their seam F1):

1. every vocabulary token alone through the encoder (``[CLS] token [SEP]``): its sentence vector;
2. the corpus through the encoder: each token's hidden state averaged over its occurrences;
3. per token, the contextual average blended with its single-token vector mapped into the
   contextual space (a linear map fitted on tokens seen ``min_count`` times or more), weighted
   by how often it was seen (``blend_strength`` pseudo-occurrences of the mapped vector);
4. each row scaled by its smooth-inverse-frequency weight ``a / (a + p)``;
5. projected on the leading ``dimensions`` axes of the rows (not centred: centring moves every
   text's vector by the same offset, which measured worse for ``sdpm``'s absolute threshold).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec
import numpy as np
from numpy.typing import NDArray

from worker.model_making import static_fit
from worker.model_making.encoder_passes import Encoder, Progress
from worker.model_making.staging import staged_directory
from worker.model_making.static_write import write_static_manifest, write_static_model
from worker.model_making.training_corpus import (
    DEFAULT_CORPUS_DIR,
    PINNED_WHEELS,
    training_sentences,
)
from worker.models.identity import IDENTITY_SCHEME
from worker.models.manifest import (
    MODEL_NAME,
    TOKENIZER_NAME,
    StaticManifest,
    read_manifest,
    sha256_file,
)
from worker.models.static_layout import DEFAULT_MAX_LENGTH

# Bump when the recipe's code changes what it writes (a cached distillation is then redone).
DISTILLER_VERSION = 1

# A stage name and how many items it has; the callback it returns is told of progress.
ProgressFactory = Callable[[str, int], Progress]


@dataclass(frozen=True)
class Recipe:
    dimensions: int = 256
    sif_a: float = 3e-4
    blend_strength: float = 5.0
    min_count: int = 5

    def describe(self) -> str:
        return (
            f"contextual token means over the corpus, blended (k={self.blend_strength:g}) with "
            f"single-token vectors mapped by least squares (tokens seen >= {self.min_count}), "
            f"SIF a={self.sif_a:g}, top {self.dimensions} axes (uncentred)"
        )


def distill(
    source_dir: Path,
    out_dir: Path,
    *,
    corpus_dir: Path = DEFAULT_CORPUS_DIR,
    recipe: Recipe = Recipe(),
    threads: int | None = None,
    sentences: list[str] | None = None,
    progress: ProgressFactory | None = None,
) -> StaticManifest:
    """Distil the encoder in ``source_dir`` into a static model in ``out_dir``.

    ``sentences`` replaces the pinned corpus (tests use a small one); the manifest says so."""
    source = read_manifest(source_dir)
    if sentences is None:
        sentences = training_sentences(corpus_dir)
        corpus = [f"{w.filename} {w.sha256}" for w in PINNED_WHEELS]
    else:
        digest = hashlib.sha256("\n".join(sentences).encode()).hexdigest()
        corpus = [f"{len(sentences)} given sentences {digest}"]
    encoder = Encoder(source_dir, threads=threads)
    if recipe.dimensions > encoder.dimension:
        raise ValueError(
            f"--dimensions {recipe.dimensions} exceeds the encoder's {encoder.dimension}"
        )

    def stage(name: str, total: int) -> Progress | None:
        return None if progress is None else progress(name, total)

    single = encoder.single_tokens(stage("single tokens", encoder.vocab_size))
    states = encoder.corpus(sentences, progress=stage("corpus sentences", len(sentences)))
    matrix = fit(single.astype(np.float64), states.state_sums, states.state_counts, recipe)

    with staged_directory(out_dir) as staging:
        write_static_model(
            staging,
            matrix,
            (source_dir / TOKENIZER_NAME).read_bytes(),
            normalize=True,
            max_length=DEFAULT_MAX_LENGTH,
        )
        identity = distilled_identity(
            source.identity or source.files[MODEL_NAME],
            source.files[TOKENIZER_NAME],
            corpus,
            recipe,
            normalize=True,
            max_length=DEFAULT_MAX_LENGTH,
        )
        files = ("model.safetensors", "tokenizer.json", "config.json")
        manifest = StaticManifest(
            identity=identity,
            dimension=int(matrix.shape[1]),
            max_seq_length=DEFAULT_MAX_LENGTH + 2,
            source=f"{source.source} {MODEL_NAME} {source.files[MODEL_NAME]}",
            corpus=corpus,
            recipe=recipe.describe(),
            distiller_version=DISTILLER_VERSION,
            files={name: sha256_file(staging / name) for name in files},
        )
        write_static_manifest(staging, manifest)
    return manifest


def fit(
    single: static_fit.F64,
    state_sums: static_fit.F64,
    state_counts: NDArray[np.int64],
    recipe: Recipe,
) -> NDArray[np.float32]:
    """Steps 3-5 of the recipe: the token matrix from the two encoder passes."""
    contextual = static_fit.contextual_means(state_sums, state_counts)
    seen = state_counts >= recipe.min_count
    if seen.sum() < single.shape[1]:
        # Too few tokens to fit a map of this width (a tiny corpus): use the vectors as they are.
        mapped = single
    else:
        mapped = single @ static_fit.linear_map(single[seen], contextual[seen])
    blended = static_fit.blend(contextual, state_counts, mapped, recipe.blend_strength)
    weighted = blended * static_fit.sif_weights(state_counts, recipe.sif_a)[:, None]
    reduced = static_fit.principal_axes(weighted, recipe.dimensions, centre=False)
    return reduced.astype(np.float32)


def distilled_identity(
    source_identity: str,
    tokenizer_sha256: str,
    corpus: list[str],
    recipe: Recipe,
    *,
    normalize: bool,
    max_length: int,
) -> str:
    """What a distilled model's vectors are determined by, digested: the encoder it came from
    (its identity: worker.models.identity), the tokenizer, the pinned corpus, the recipe and
    the distiller's version, and the config that changes the output.

    Not the matrix bytes: the encoder passes are float arithmetic whose last bits may differ
    between CPUs (onnxruntime picks kernels by instruction set), and a model rebuilt from the
    same inputs must keep every chunk id (docs/operating/upgrades.md, "Model changes")."""
    material = {
        "scheme": IDENTITY_SCHEME,
        "kind": "static",
        "made_by": "chunkstream model distill",
        "source": source_identity,
        "tokenizer_sha256": tokenizer_sha256,
        "corpus": corpus,
        "recipe": dataclasses.asdict(recipe),
        "distiller_version": DISTILLER_VERSION,
        "normalize": normalize,
        "max_length": max_length,
    }
    return hashlib.sha256(msgspec.json.encode(material, order="sorted")).hexdigest()
