"""The real all-MiniLM-L6-v2 build against sentence-transformers' golden outputs and our own
numpy forward pass. Needs the built model (a session fixture builds it once, ~10 s)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray
from safetensors.numpy import load_file

from tests.support.embedding import embed_batch
from tests.support.numpy_reference import reference_embedding
from worker.inference.batcher import Batcher
from worker.inference.serving import intra_op_threads_for
from worker.model_making.source import read_source
from worker.models import tokenization
from worker.models.onnx_embedder import OnnxEmbedder

pytestmark = pytest.mark.model

# Our own sentences for the self-contained check; no third-party text.
OWN_SENTENCES = [
    "The worker reads documents from Kafka and writes chunks back.",
    "Batches are sorted by length so that short texts are not padded to long ones.",
    "يقسم العامل المستندات إلى أجزاء صغيرة قبل حساب التضمينات.",
    "Café naïveté — ½ € ✓ 🚀 東京 Ωμέγα",
    " ".join(
        f"Sentence number {i} repeats itself so that the paragraph runs past the window."
        for i in range(40)
    ),
]


def cosines(a: NDArray[np.float32], b: NDArray[np.float32]) -> NDArray[np.float32]:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    cos: NDArray[np.float32] = np.sum(a * b, axis=1)
    return cos


@pytest.fixture(scope="module")
def fp32(model_dir: Path) -> OnnxEmbedder:
    return OnnxEmbedder.load(model_dir, verify=True)


@pytest.fixture(scope="module")
def int8(model_dir: Path) -> OnnxEmbedder:
    return OnnxEmbedder.load(model_dir, int8=True)


@pytest.fixture(scope="module")
def golden(golden_dir: Path) -> tuple[list[str], NDArray[np.float32]]:
    sentences = (golden_dir / "sentences.txt").read_text(encoding="utf-8").splitlines()
    extra = json.loads((golden_dir / "extra.json").read_text(encoding="utf-8"))
    texts = sentences + [item["text"] for item in extra]
    vectors = np.concatenate(
        [np.load(golden_dir / "embeddings.npy"), np.load(golden_dir / "extra_embeddings.npy")]
    )
    assert len(texts) == len(vectors) == 109
    return texts, vectors


def test_fp32_matches_every_golden_embedding(
    fp32: OnnxEmbedder, golden: tuple[list[str], NDArray[np.float32]]
) -> None:
    texts, want = golden
    got = embed_batch(fp32, texts)  # length-sorted batches: the path the worker uses
    assert got.dtype == np.float32
    assert got.shape == (109, 384)
    cos = cosines(got, want)
    worst = int(np.argmin(cos))
    assert cos.min() >= 0.9999, f"text {worst} ({texts[worst][:40]!r}): cosine {cos[worst]}"


def test_fp32_golden_holds_alone_and_padded(
    fp32: OnnxEmbedder, golden: tuple[list[str], NDArray[np.float32]]
) -> None:
    texts, want = golden
    # The hard inputs alone (no padding) and all in one padded batch must both match.
    alone = np.vstack([fp32.embed([t]) for t in texts[100:]])
    assert cosines(alone, want[100:]).min() >= 0.9999
    padded = fp32.embed(texts[95:])
    assert cosines(padded, want[95:]).min() >= 0.9999


def test_int8_keeps_the_golden_mean(
    int8: OnnxEmbedder, golden: tuple[list[str], NDArray[np.float32]]
) -> None:
    texts, want = golden
    cos = cosines(embed_batch(int8, texts), want)
    assert cos.mean() >= 0.99
    assert cos.min() >= 0.95


class MeetingEmbedder:
    """The real model, whose first two batches must both be inside ``embed`` before either
    runs: proof that the batcher's concurrent batches overlap on one shared session."""

    def __init__(self, inner: OnnxEmbedder) -> None:
        self.inner = inner
        self.meeting = threading.Barrier(2, timeout=30)
        self.calls = 0
        self._lock = threading.Lock()

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        return self.inner.token_lengths(texts)

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        with self._lock:
            self.calls += 1
            meets = self.calls <= 2
        if meets:
            self.meeting.wait()  # BrokenBarrierError after 30 s if batches ran one at a time
        return self.inner.embed(texts)


async def test_concurrent_batches_on_one_session_match_the_golden(
    model_dir: Path, golden: tuple[list[str], NDArray[np.float32]]
) -> None:
    texts, want = golden
    embedder = OnnxEmbedder.load(model_dir, intra_op_threads=intra_op_threads_for(2))
    backend = MeetingEmbedder(embedder)
    requests = [texts[i : i + 11] for i in range(0, len(texts), 11)]  # documents of 11 texts
    async with Batcher(backend, max_batch_size=8, concurrent_batches=2) as batcher:
        results = await asyncio.gather(*(batcher.submit(r) for r in requests))
    got = np.vstack(results)
    assert backend.calls == batcher.stats.batches >= 14  # 109 texts, at most 8 a batch
    cos = cosines(got, want)
    worst = int(np.argmin(cos))
    assert cos.min() >= 0.9999, f"text {worst} ({texts[worst][:40]!r}): cosine {cos[worst]}"
    # Rows routed back to the right request and position: the same as one batch at a time.
    np.testing.assert_allclose(got, embed_batch(embedder, texts), atol=1e-5)


def test_intra_op_threads_share_out_the_cpus() -> None:
    cpus = intra_op_threads_for(1)
    assert cpus >= 1
    assert intra_op_threads_for(2) == max(1, cpus // 2)
    assert intra_op_threads_for(4 * cpus) == 1


def test_long_inputs_are_truncated_to_256_tokens(fp32: OnnxEmbedder) -> None:
    assert fp32.max_seq_length == 256
    lengths = fp32.token_lengths(OWN_SENTENCES)
    assert lengths[-1] == 256
    assert all(0 < n < 256 for n in lengths[:-1])


def test_onnx_matches_an_independent_numpy_forward_pass(
    fp32: OnnxEmbedder, source_dir: Path
) -> None:
    source = read_source(source_dir)
    weights = load_file(str(source.weights_path))
    tokenizer = tokenization.load_tokenizer(source.tokenizer_path, source.max_seq_length)
    want = np.stack(
        [
            reference_embedding(weights, source.config, tokenizer.encode(t).ids, pooling="mean")
            for t in OWN_SENTENCES
        ]
    )
    got = fp32.embed(OWN_SENTENCES)
    assert cosines(got, want.astype(np.float32)).min() >= 0.99999
    np.testing.assert_allclose(got, want, atol=1e-4)


def test_similar_sentences_are_closer_than_unrelated_ones(fp32: OnnxEmbedder) -> None:
    a, b, c = fp32.embed(
        [
            "The cat sat on the mat.",
            "A cat was sitting on a rug.",
            "Quarterly revenue grew by eight percent.",
        ]
    )
    assert float(a @ b) > float(a @ c) + 0.3


def test_unbuilt_directory_and_missing_int8_are_explained(
    tmp_path: Path, tiny_source: Path
) -> None:
    from worker.model_making.build import build_model
    from worker.models.manifest import ManifestError

    with pytest.raises(ManifestError, match=r"no manifest\.json"):
        OnnxEmbedder.load(tmp_path)
    build_model(tiny_source, tmp_path / "fp32-only")
    with pytest.raises(ManifestError, match="rebuild with --int8"):
        OnnxEmbedder.load(tmp_path / "fp32-only", int8=True)
    assert OnnxEmbedder.load(tmp_path / "fp32-only").providers == ["CPUExecutionProvider"]
