"""``OnnxEmbedder``: tokenizer + onnxruntime session over a built model directory.

Load once per process (:meth:`OnnxEmbedder.load`); ``embed`` is then safe to call from several
worker threads at once (onnxruntime's ``run`` is thread-safe; the batcher runs concurrent batches
on one session) while another thread asks for ``token_lengths``. Pooling and normalisation
happen inside the graph, so the output is used as it comes.

The batcher measures every text (``token_lengths``) before it embeds it; the encodings made for
that are kept in a small bounded cache and taken out again by ``embed``, so a text is tokenised
once on the way through.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnxruntime as ort
from numpy.typing import NDArray
from tokenizers import Encoding, Tokenizer

from worker.models import tokenization
from worker.models.manifest import (
    INT8_MODEL_NAME,
    MODEL_NAME,
    OUTPUT_NAME,
    TOKENIZER_NAME,
    Manifest,
    ManifestError,
    mismatched_files,
    read_manifest,
)

DEFAULT_PROVIDERS = ("CPUExecutionProvider",)
# Encodings measured but not yet embedded. Bounded so that texts measured and then dropped
# (a cancelled request) cannot grow it; a miss only costs a second tokenisation.
ENCODING_CACHE_SIZE = 16384


class OnnxEmbedder:
    """Sentence embeddings from a directory made by ``chunkstream model build``."""

    def __init__(
        self, session: ort.InferenceSession, tokenizer: Tokenizer, manifest: Manifest
    ) -> None:
        self._session = session
        self._tokenizer = tokenizer
        self._pad_id = tokenization.pad_id(tokenizer)
        self.manifest = manifest
        self._measured: OrderedDict[str, Encoding] = OrderedDict()
        self._measured_lock = threading.Lock()

    @classmethod
    def load(
        cls,
        model_dir: Path,
        *,
        int8: bool = False,
        intra_op_threads: int | None = None,
        providers: Sequence[str] = DEFAULT_PROVIDERS,
        verify: bool = False,
    ) -> OnnxEmbedder:
        """Open the model. ``verify`` re-hashes every file against the manifest first."""
        manifest = read_manifest(model_dir)
        if verify:
            bad = mismatched_files(model_dir, manifest)
            if bad:
                raise ManifestError(f"{model_dir}: files differ from the manifest: {bad}")
        model_name = INT8_MODEL_NAME if int8 else MODEL_NAME
        if model_name not in manifest.files:
            hint = " (rebuild with --int8)" if int8 else ""
            raise ManifestError(f"{model_dir} has no {model_name}{hint}")
        if not (model_dir / model_name).is_file():
            # Listed but not shipped: the image keeps only the int8 variant
            # (docs/operating/deploy.md, "The image").
            raise ManifestError(
                f"{model_dir} does not ship {model_name} (its manifest lists it); "
                f"set CHUNKSTREAM_MODEL_INT8={'false' if int8 else 'true'} for the variant it has"
            )

        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if intra_op_threads is not None:
            options.intra_op_num_threads = intra_op_threads
        # One graph, executed node after node: inter-op threads would only contend with intra-op.
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(
            str(model_dir / model_name), sess_options=options, providers=list(providers)
        )
        tokenizer = tokenization.load_tokenizer(model_dir / TOKENIZER_NAME, manifest.max_seq_length)
        return cls(session, tokenizer, manifest)

    @property
    def dimension(self) -> int:
        return self.manifest.dimension

    @property
    def max_seq_length(self) -> int:
        return self.manifest.max_seq_length

    @property
    def providers(self) -> list[str]:
        return list(self._session.get_providers())

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        encodings = tokenization.encode(self._tokenizer, texts)
        with self._measured_lock:
            for text, encoding in zip(texts, encodings, strict=True):
                self._measured[text] = encoding
            while len(self._measured) > ENCODING_CACHE_SIZE:
                self._measured.popitem(last=False)
        return [len(e.ids) for e in encodings]

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        batch = tokenization.pad(self._encodings(texts), self._pad_id)
        (output,) = self._session.run(
            [OUTPUT_NAME],
            {
                "input_ids": batch.input_ids,
                "attention_mask": batch.attention_mask,
                "token_type_ids": batch.token_type_ids,
            },
        )
        return np.asarray(output, dtype=np.float32)

    def _encodings(self, texts: Sequence[str]) -> list[Encoding]:
        found: list[Encoding | None] = []
        with self._measured_lock:
            for text in texts:
                found.append(self._measured.pop(text, None))
        missing = [i for i, encoding in enumerate(found) if encoding is None]
        if missing:
            fresh = tokenization.encode(self._tokenizer, [texts[i] for i in missing])
            for i, encoding in zip(missing, fresh, strict=True):
                found[i] = encoding
        return [e for e in found if e is not None]
