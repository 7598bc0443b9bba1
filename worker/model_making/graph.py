"""The BERT sentence-encoder forward pass written out as an ONNX graph, from numpy weights.

Inputs ``input_ids``, ``attention_mask`` and ``token_type_ids`` (int64, ``[batch, sequence]``);
output ``sentence_embedding`` (float32, ``[batch, hidden]``), pooled over the attention mask and
L2-normalised, so a caller never post-processes. Both axes are dynamic.

The graph uses only standard opset-17 operators (LayerNormalization, Erf for exact GELU) so the
ONNX checker validates it, and onnxruntime applies its own fusions when a session opens: the
encoder's hidden state is kept 2-D, ``[batch·sequence, hidden]``, so every dense layer's MatMul
and bias Add become one Gemm (int8: the bias goes into DynamicQuantizeMatMul), and the Erf
pattern becomes one Gelu kernel.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from numpy.typing import NDArray
from onnx import TensorProto, helper, numpy_helper

from worker.model_making.source import BertConfig, Pooling
from worker.models.manifest import INPUT_NAMES, OUTPUT_NAME

OPSET = 17

# Added to attention scores of padding keys. A large finite number, not -inf, so a row whose keys
# are all padding (a padding query row) still softmaxes to finite values instead of NaN.
_MASKED_SCORE = -1.0e9
# Guards the divisions in pooling and normalisation, as sentence-transformers does.
_POOL_EPS = 1.0e-9
_NORM_EPS = 1.0e-12

Weights = Mapping[str, NDArray[np.generic]]


@dataclass
class _Graph:
    """Accumulates nodes and initializers; hands out unique tensor names."""

    nodes: list[onnx.NodeProto] = field(default_factory=list)
    initializers: list[onnx.TensorProto] = field(default_factory=list)
    _names: set[str] = field(default_factory=set)
    _count: int = 0

    def op(self, op_type: str, *inputs: str, **attrs: Any) -> str:
        self._count += 1
        out = f"{op_type.lower()}_{self._count}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attrs))
        return out

    def const(self, name: str, value: NDArray[np.generic]) -> str:
        """An initializer; a name used again refers to the first one (shared constants)."""
        if name not in self._names:
            self._names.add(name)
            # np.array, not np.ascontiguousarray: the latter turns 0-d scalars into shape [1].
            self.initializers.append(numpy_helper.from_array(np.array(value, order="C"), name))
        return name


@dataclass(frozen=True)
class _Shapes:
    """Reshape targets made once per graph (two depend on the runtime sequence length)."""

    tokens: str  # [-1, hidden]: the encoder's layout
    heads: str  # [-1, sequence, heads, head]: per-head view for attention
    sequences: str  # [-1, sequence, hidden]: back to one row per text, for pooling


class WeightNames:
    """Looks up BertModel weights whether or not the checkpoint prefixes them with ``bert.``."""

    def __init__(self, weights: Weights) -> None:
        self._weights = weights
        self._prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""

    def get(self, name: str) -> NDArray[np.float32]:
        key = self._prefix + name
        if key not in self._weights:
            raise KeyError(f"weight {key!r} not in the checkpoint")
        return np.asarray(self._weights[key], dtype=np.float32)


def build_graph(
    weights: Weights, config: BertConfig, *, pooling: Pooling, name: str
) -> onnx.ModelProto:
    """The full encoder + pooling + normalisation as an opset-17 ONNX model."""
    w = WeightNames(weights)
    g = _Graph()
    ids, mask, types = INPUT_NAMES

    # The sequence length as a 1-D tensor straight from Shape, so that axis stays dynamic.
    seq_len = g.op(
        "Slice",
        g.op("Shape", ids),
        g.const("index_1", np.array([1], np.int64)),
        g.const("index_2", np.array([2], np.int64)),
    )
    shapes = _Shapes(
        tokens=g.const("tokens_shape", np.array([-1, config.hidden_size], np.int64)),
        heads=g.op(
            "Concat",
            g.const("index_minus_1", np.array([-1], np.int64)),
            seq_len,
            g.const("heads_dims", np.array([config.num_heads, config.head_size], np.int64)),
            axis=0,
        ),
        sequences=g.op(
            "Concat",
            g.const("index_minus_1", np.array([-1], np.int64)),
            seq_len,
            g.const("hidden_dim", np.array([config.hidden_size], np.int64)),
            axis=0,
        ),
    )
    # The encoder works on [batch·sequence, hidden]: every dense layer is then a 2-D MatMul + Add,
    # which onnxruntime fuses into one Gemm with its bias (a 3-D MatMul keeps a separate Add).
    hidden = g.op("Reshape", _embeddings(g, w, config, ids, types, seq_len), shapes.tokens)
    mask_f = g.op("Cast", mask, to=TensorProto.FLOAT)
    score_bias = _score_bias(g, mask)
    for layer in range(config.num_layers):
        hidden = _encoder_layer(g, w, config, layer, hidden, score_bias, shapes)

    pooled = _pool(g, g.op("Reshape", hidden, shapes.sequences), mask_f, pooling)
    norm = g.op(
        "Max",
        # Opset 17's ReduceL2 still takes its axes as an attribute (ReduceSum moved to an input).
        g.op("ReduceL2", pooled, axes=[1], keepdims=1),
        g.const("norm_eps", np.array(_NORM_EPS, np.float32)),
    )
    g.nodes.append(helper.make_node("Div", [pooled, norm], [OUTPUT_NAME]))

    inputs = [
        helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"])
        for n in INPUT_NAMES
    ]
    output = helper.make_tensor_value_info(
        OUTPUT_NAME, TensorProto.FLOAT, ["batch", config.hidden_size]
    )
    graph = helper.make_graph(g.nodes, name, inputs, [output], g.initializers)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="chunkstream",
    )
    # Pin the IR version to one every onnxruntime of the supported range (>= 1.17) loads.
    model.ir_version = 8
    return model


def _embeddings(
    g: _Graph, w: WeightNames, config: BertConfig, ids: str, types: str, seq_len: str
) -> str:
    words = g.op(
        "Gather", g.const("word_embeddings", w.get("embeddings.word_embeddings.weight")), ids
    )
    token_types = g.op(
        "Gather",
        g.const("token_type_embeddings", w.get("embeddings.token_type_embeddings.weight")),
        types,
    )
    # Rows 0..seq-1 of the position table, sliced with the runtime length.
    position_table = g.const("position_embeddings", w.get("embeddings.position_embeddings.weight"))
    positions = g.op(
        "Slice",
        position_table,
        g.const("index_0", np.array([0], np.int64)),
        seq_len,
        g.const("index_0", np.array([0], np.int64)),
    )
    summed = g.op("Add", g.op("Add", words, token_types), positions)
    return _layer_norm(g, w, config, summed, "embeddings.LayerNorm")


def _layer_norm(g: _Graph, w: WeightNames, config: BertConfig, x: str, prefix: str) -> str:
    return g.op(
        "LayerNormalization",
        x,
        g.const(f"{prefix}.weight", w.get(f"{prefix}.weight")),
        g.const(f"{prefix}.bias", w.get(f"{prefix}.bias")),
        axis=-1,
        epsilon=config.layer_norm_eps,
    )


def _dense(g: _Graph, w: WeightNames, x: str, prefix: str) -> str:
    # torch Linear stores [out, in]; MatMul wants [in, out]. Transposing once here keeps the graph
    # free of Transpose nodes on weights (and lets the quantiser see plain MatMul weights).
    kernel = g.const(f"{prefix}.kernel", w.get(f"{prefix}.weight").T)
    return g.op(
        "Add", g.op("MatMul", x, kernel), g.const(f"{prefix}.bias", w.get(f"{prefix}.bias"))
    )


def _split_heads(g: _Graph, x: str, shapes: _Shapes, perm: list[int]) -> str:
    """``[batch·sequence, hidden]`` → ``[batch, sequence, heads, head]`` → ``perm``."""
    return g.op("Transpose", g.op("Reshape", x, shapes.heads), perm=perm)


def _encoder_layer(
    g: _Graph,
    w: WeightNames,
    config: BertConfig,
    layer: int,
    x: str,
    score_bias: str,
    shapes: _Shapes,
) -> str:
    p = f"encoder.layer.{layer}"
    scale = np.array(math.sqrt(config.head_size), np.float32)
    q = _split_heads(g, _dense(g, w, x, f"{p}.attention.self.query"), shapes, [0, 2, 1, 3])
    k = _split_heads(g, _dense(g, w, x, f"{p}.attention.self.key"), shapes, [0, 2, 3, 1])
    v = _split_heads(g, _dense(g, w, x, f"{p}.attention.self.value"), shapes, [0, 2, 1, 3])
    # Divided by √head after the product, then masked: the order (MatMul → Div → Add → Softmax)
    # that onnxruntime's attention fusion recognises (a Mul here would be mistaken for the mask's).
    products = g.op("Div", g.op("MatMul", q, k), g.const(f"{p}.scale", scale))
    scores = g.op("Add", products, score_bias)  # [batch, heads, seq, seq]
    context = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
    merged = g.op("Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]), shapes.tokens)
    attended = g.op("Add", _dense(g, w, merged, f"{p}.attention.output.dense"), x)
    x = _layer_norm(g, w, config, attended, f"{p}.attention.output.LayerNorm")

    inner = _gelu(g, _dense(g, w, x, f"{p}.intermediate.dense"), p)
    out = g.op("Add", _dense(g, w, inner, f"{p}.output.dense"), x)
    return _layer_norm(g, w, config, out, f"{p}.output.LayerNorm")


def _score_bias(g: _Graph, mask: str) -> str:
    """``[batch, 1, 1, seq]``: 0 for real keys, a large negative number for padding keys.

    Written as Unsqueeze → Unsqueeze → Cast → Sub(1, ·) → Mul, the shape of the mask that
    onnxruntime's attention fusion matches (one two-axis Unsqueeze would not be recognised).
    """
    expanded = g.op(
        "Unsqueeze",
        g.op("Unsqueeze", mask, g.const("axes_1", np.array([1], np.int64))),
        g.const("axes_2", np.array([2], np.int64)),
    )
    inverted = g.op(
        "Sub",
        g.const("one", np.array(1.0, np.float32)),
        g.op("Cast", expanded, to=TensorProto.FLOAT),
    )
    return g.op("Mul", inverted, g.const("masked_score", np.array(_MASKED_SCORE, np.float32)))


def _gelu(g: _Graph, x: str, prefix: str) -> str:
    """Exact GELU, ``0.5·x·(1 + erf(x/√2))`` — the form BERT was trained with."""
    erf = g.op(
        "Erf", g.op("Div", x, g.const(f"{prefix}.sqrt2", np.array(math.sqrt(2.0), np.float32)))
    )
    one_plus = g.op("Add", erf, g.const(f"{prefix}.gelu_one", np.array(1.0, np.float32)))
    half_x = g.op("Mul", x, g.const(f"{prefix}.gelu_half", np.array(0.5, np.float32)))
    return g.op("Mul", half_x, one_plus)


def _pool(g: _Graph, hidden: str, mask_f: str, pooling: Pooling) -> str:
    if pooling == "cls":
        return g.op("Gather", hidden, g.const("scalar_0", np.array(0, np.int64)), axis=1)
    # Mean over real tokens only: padding rows carry attention output too, so they must be masked.
    mask_3d = g.op("Unsqueeze", mask_f, g.const("axes_2", np.array([2], np.int64)))
    seq_axis = g.const("axes_seq", np.array([1], np.int64))
    total = g.op("ReduceSum", g.op("Mul", hidden, mask_3d), seq_axis, keepdims=0)
    count = g.op(
        "Max",
        g.op("ReduceSum", mask_3d, seq_axis, keepdims=0),
        g.const("pool_eps", np.array(_POOL_EPS, np.float32)),
    )
    return g.op("Div", total, count)
