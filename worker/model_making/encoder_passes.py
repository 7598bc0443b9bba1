"""What the distillation asks of the ONNX encoder: vectors of single tokens, and per-token
hidden states over a corpus.

Invariants: the encoder is the built ``model.onnx`` (fp32) of a model directory, run with one
extra graph output, ``token_states`` — the last layer's hidden state per token, the tensor the
graph mean-pools into the sentence vector (found as the one ``Reshape`` back to
``[batch, sequence, hidden]``). Nothing else in the graph changes, so ``sentence_embedding`` is
the model's own output. Texts go through in length-sorted batches (less padding) and results
come back in input order; the same inputs give the same numbers on one machine.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from numpy.typing import NDArray
from onnx import TensorProto, helper
from tokenizers import Encoding

from worker.models import tokenization
from worker.models.manifest import MODEL_NAME, OUTPUT_NAME, TOKENIZER_NAME, read_manifest

TOKEN_STATES = "token_states"
Progress = Callable[[int], None]  # called with how many more items are done


@dataclass(frozen=True)
class CorpusStates:
    """The encoder's view of a corpus, in corpus order."""

    token_ids: list[NDArray[np.int64]]  # per sentence: its ids without [CLS]/[SEP]
    sentence_vectors: NDArray[np.float32]  # [sentences, hidden], the model's output (L2 = 1)
    state_sums: NDArray[np.float64]  # [vocab, hidden]: sum of each token's hidden states
    state_counts: NDArray[np.int64]  # [vocab]: how often each token occurred


class Encoder:
    """``model.onnx`` of ``model_dir`` with the per-token hidden states exposed."""

    def __init__(self, model_dir: Path, *, threads: int | None = None) -> None:
        manifest = read_manifest(model_dir)
        self.dimension = manifest.dimension
        self.tokenizer = tokenization.load_tokenizer(
            model_dir / TOKENIZER_NAME, manifest.max_seq_length
        )
        self._pad_id = tokenization.pad_id(self.tokenizer)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.inter_op_num_threads = 1
        if threads is not None:
            options.intra_op_num_threads = threads
        model = _with_token_states(onnx.load(str(model_dir / MODEL_NAME)), self.dimension)
        self._session = ort.InferenceSession(
            model.SerializeToString(), sess_options=options, providers=["CPUExecutionProvider"]
        )

    @property
    def vocab_size(self) -> int:
        return int(self.tokenizer.get_vocab_size(with_added_tokens=True))

    def run(
        self, encodings: Sequence[Encoding]
    ) -> tuple[NDArray[np.float32], NDArray[np.float32], NDArray[np.int64]]:
        """Sentence vectors, token states ``[batch, longest, hidden]`` and the attention mask."""
        batch = tokenization.pad(encodings, self._pad_id)
        vectors, states = self._session.run(
            [OUTPUT_NAME, TOKEN_STATES],
            {
                "input_ids": batch.input_ids,
                "attention_mask": batch.attention_mask,
                "token_type_ids": batch.token_type_ids,
            },
        )
        return np.asarray(vectors), np.asarray(states), batch.attention_mask

    def single_tokens(self, progress: Progress | None = None) -> NDArray[np.float32]:
        """Every vocabulary token alone, ``[CLS] token [SEP]``: the model's sentence vector
        ``[vocab, hidden]`` (the naive distillation's starting point)."""
        tokenizer = self.tokenizer
        cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
        if cls_id is None or sep_id is None:
            raise ValueError("the tokenizer has no [CLS]/[SEP]; only BERT-style models distil")
        out = np.zeros((self.vocab_size, self.dimension), dtype=np.float32)
        step = 1024
        for start in range(0, self.vocab_size, step):
            ids = np.arange(start, min(start + step, self.vocab_size), dtype=np.int64)
            input_ids = np.stack(
                [np.full_like(ids, cls_id), ids, np.full_like(ids, sep_id)], axis=1
            )
            (vectors,) = self._session.run(
                [OUTPUT_NAME],
                {
                    "input_ids": input_ids,
                    "attention_mask": np.ones_like(input_ids),
                    "token_type_ids": np.zeros_like(input_ids),
                },
            )
            out[ids] = vectors
            if progress is not None:
                progress(len(ids))
        return out

    def corpus(
        self,
        sentences: Sequence[str],
        *,
        max_batch_tokens: int = 8192,
        progress: Progress | None = None,
    ) -> CorpusStates:
        """Sentence vectors and per-token state sums over ``sentences``."""
        encodings = tokenization.encode(self.tokenizer, sentences)
        order = sorted(range(len(encodings)), key=lambda i: (len(encodings[i].ids), i))
        vectors = np.zeros((len(sentences), self.dimension), dtype=np.float32)
        sums = np.zeros((self.vocab_size, self.dimension), dtype=np.float64)
        counts = np.zeros(self.vocab_size, dtype=np.int64)
        start = 0
        while start < len(order):
            longest = len(encodings[order[start]].ids)
            stop = start + 1
            while (
                stop < len(order)
                and (stop - start + 1) * max(longest, len(encodings[order[stop]].ids))
                <= max_batch_tokens
            ):
                longest = max(longest, len(encodings[order[stop]].ids))
                stop += 1
            chosen = order[start:stop]
            batch_vectors, states, mask = self.run([encodings[i] for i in chosen])
            vectors[chosen] = batch_vectors
            # Real tokens only: padding has no token, [CLS] (first) and [SEP] (last) have no
            # place in a static model.
            inner = mask.astype(bool)
            inner[:, 0] = False
            inner[np.arange(len(chosen)), mask.sum(axis=1) - 1] = False
            ids = np.stack(
                [
                    np.pad(encodings[i].ids, (0, mask.shape[1] - len(encodings[i].ids)))
                    for i in chosen
                ]
            )
            _accumulate(sums, counts, ids[inner], states[inner])
            if progress is not None:
                progress(len(chosen))
            start = stop
        token_ids = [np.asarray(e.ids[1:-1], dtype=np.int64) for e in encodings]
        return CorpusStates(token_ids, vectors, sums, counts)


def _accumulate(
    sums: NDArray[np.float64],
    counts: NDArray[np.int64],
    ids: NDArray[np.int64],
    states: NDArray[np.float32],
) -> None:
    """``sums[id] += state`` for every (id, state) pair, grouped by id (np.add.at is slow)."""
    order = np.argsort(ids, kind="stable")
    ids, states = ids[order], states[order]
    unique, starts, found = np.unique(ids, return_index=True, return_counts=True)
    sums[unique] += np.add.reduceat(states.astype(np.float64), starts, axis=0)
    counts[unique] += found


def _with_token_states(model: onnx.ModelProto, hidden: int) -> onnx.ModelProto:
    graph = model.graph
    producers = {out: node for node in graph.node for out in node.output}
    found = [
        node.output[0]
        for node in graph.node
        if node.op_type == "Reshape"
        and node.input[1] in producers
        and producers[node.input[1]].op_type == "Concat"
        and "hidden_dim" in producers[node.input[1]].input
    ]
    if len(found) != 1:
        raise ValueError(
            f"cannot find the token states in {MODEL_NAME} (found {len(found)} candidates); "
            "rebuild the model with `chunkstream model build`"
        )
    graph.node.append(helper.make_node("Identity", [found[0]], [TOKEN_STATES]))
    graph.output.append(
        helper.make_tensor_value_info(
            TOKEN_STATES, TensorProto.FLOAT, ["batch", "sequence", hidden]
        )
    )
    return model
