"""Random layer nodes: MatMul and Gemm, Conv and ConvTranspose with random groups, strides, dilations and
padding, pooling, normalizations, determinants, softmax, reductions, arg-reductions, CumSum, TopK and recurrent
layers."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto as T

from .builder import Builder, Rejected
from .elementwise import positive


def matmul(b: Builder) -> None:
    x = b.pick(lambda v: v.rank >= 1)
    k = x.shape[-1]
    other = b.pick(lambda v: v.rank >= 2 and v.shape[-2] == k) if b.chance(0.3) else None
    if other is None:
        batch = x.shape[1:-2] if x.rank > 2 and b.chance(0.3) else ()
        other = b.weights(*batch, k, b.int(1, 6))
    b.node("MatMul", [x.name, other if isinstance(other, str) else other.name])


def gemm(b: Builder) -> None:
    x = b.pick(lambda v: v.rank == 2)
    trans_a, trans_b = b.int(0, 1), b.int(0, 1)
    m, k = x.shape[::-1] if trans_a else x.shape
    n = b.int(1, 6)
    inputs = [x.name, b.weights(*((n, k) if trans_b else (k, n)))]
    if b.chance(0.7):
        inputs.append(b.weights(*b.choice([(n,), (1, n), (m, 1), (m, n), ()])))
    b.node("Gemm", inputs, transA=trans_a, transB=trans_b, alpha=b.uniform(0.5, 1.5), beta=b.uniform(0.5, 1.5))


def window_attrs(b: Builder, kernel: list[int], spatial: tuple[int, ...], dilate: bool = True) -> dict:
    """Strides, dilations and pads or auto_pad for a kernel window over the input's `spatial` dims (a pad
    smaller than the kernel, as pooling needs). A dilated window fits the input: onnxruntime computes one output
    where ONNX says there is none."""
    attrs = dict(strides=[b.int(1, 2) for _ in kernel])
    if b.chance(0.25):
        attrs["auto_pad"] = b.choice(["SAME_UPPER", "SAME_LOWER", "VALID"])
    elif b.chance(0.7):
        attrs["pads"] = [b.int(0, min(1, k - 1)) for k in kernel * 2]
    if dilate and b.chance(0.3) and attrs.get("auto_pad", "VALID") == "VALID":  # onnxruntime: not with SAME
        attrs["dilations"] = [b.int(1, 2) if 2 * k - 1 <= d else 1 for k, d in zip(kernel, spatial)]
    return attrs


def conv(b: Builder) -> None:
    x = b.pick(lambda v: v.rank in (3, 4))
    c = x.shape[1]
    group = b.choice([g for g in range(1, c + 1) if c % g == 0])
    out = group * b.int(1, 3) if group > 1 else b.int(1, 6)
    kernel = [b.int(1, 3) for _ in x.shape[2:]]
    inputs = [x.name, b.weights(out, c // group, *kernel, scale=0.5)] + ([b.weights(out)] if b.chance(0.7) else [])
    attrs = window_attrs(b, kernel, x.shape[2:])
    if "pads" in attrs and b.chance(0.2):  # a conv may pad more than its kernel: windows wholly in the padding
        attrs["pads"] = [b.int(0, k + 1) for k in kernel * 2]
    b.node("Conv", inputs, group=group, kernel_shape=kernel, **attrs)


def conv_transpose(b: Builder) -> None:
    transposed(b, 2, 3, dilate=False)


def transposed(b: Builder, dims: int, most_out: int, dilate: bool) -> None:
    """A ConvTranspose over `dims` spatial dims (an input of rank dims + 2), of up to `most_out` output channels a
    group, dilated now and then where `dilate`."""
    x = b.pick(lambda v: v.rank == dims + 2)
    c = x.shape[1]
    group = b.choice([g for g in range(1, c + 1) if c % g == 0])
    out = b.int(1, most_out)
    kernel = [b.int(1, 3) for _ in range(dims)]
    strides = [b.int(1, 2) for _ in range(dims)]
    attrs = dict(strides=strides, pads=[b.int(0, k - 1) for k in kernel * 2], group=group)
    if dilate and b.chance(0.3):
        attrs["dilations"] = [b.int(1, 2) for _ in range(dims)]
    if b.chance(0.3):
        attrs["output_padding"] = [b.int(0, s - 1) for s in strides]
    inputs = [x.name, b.weights(c, out, *kernel, scale=0.5)] + ([b.weights(out * group)] if b.chance(0.5) else [])
    b.node("ConvTranspose", inputs, **attrs)


def last_window_in_padding(spatial, kernel, attrs: dict) -> bool:
    """Whether ceil_mode would add a window starting in the end padding, which the spec drops: ONNX shape
    inference keeps it (onnxruntime and cglow do not), and the generator follows ONNX shape inference."""
    n = len(kernel)
    pads, strides = attrs.get("pads", [0] * 2 * n), attrs["strides"]
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, attrs.get("dilations", [1] * n))]
    return any((-(-(i + pads[a] + pads[a + n] - span) // s)) * s >= i + pads[a]
               for a, (i, span, s) in enumerate(zip(spatial, spans, strides)))


def pool(b: Builder) -> None:
    x = b.pick(lambda v: v.rank in (3, 4))
    op = b.choice(["MaxPool", "AveragePool"])
    kernel = [b.int(1, min(3, d)) for d in x.shape[2:]]
    attrs = window_attrs(b, kernel, x.shape[2:], dilate=op == "MaxPool")
    if b.chance(0.3) and "auto_pad" not in attrs and not last_window_in_padding(x.shape[2:], kernel, attrs):
        attrs["ceil_mode"] = 1
    if op == "AveragePool":
        attrs["count_include_pad"] = b.int(0, 1)
    b.node(op, [x.name], kernel_shape=kernel, exact=x.exact and op == "MaxPool", **attrs)


def global_pool(b: Builder) -> None:
    x = b.pick(lambda v: v.rank in (3, 4))  # onnxruntime: "Unsupported pooling size" for more
    op = b.choice(["GlobalAveragePool", "GlobalMaxPool"])
    b.node(op, [x.name], exact=x.exact and op == "GlobalMaxPool")


def batch_norm(b: Builder) -> None:
    x = b.pick(lambda v: v.rank >= 2)
    c = x.shape[1]
    stats = [b.weights(c), b.weights(c), b.weights(c), b.const(b.rng.uniform(0.5, 2, c).astype(np.float32))]
    b.node("BatchNormalization", [x.name] + stats, epsilon=b.uniform(1e-5, 1e-2))


def normalization(b: Builder) -> None:
    x = b.pick(lambda v: v.rank >= 2)
    op = b.choice(["InstanceNormalization", "LayerNormalization", "LpNormalization", "LRN"])
    if op == "InstanceNormalization" and x.rank >= 3:
        b.node(op, [x.name, b.weights(x.shape[1]), b.weights(x.shape[1])], epsilon=b.uniform(1e-5, 1e-2))
    elif op == "LayerNormalization":
        axis = b.int(-x.rank, x.rank - 1)
        inputs = [x.name, b.weights(*x.shape[axis:])] + ([b.weights(*x.shape[axis:])] if b.chance(0.5) else [])
        b.node(op, inputs, axis=axis, epsilon=b.uniform(1e-5, 1e-2))
    elif op == "LpNormalization":
        b.node(op, [positive(b, x)], axis=b.int(-x.rank, x.rank - 1), p=b.int(1, 2))
    elif x.rank == 4:
        b.node("LRN", [x.name], size=b.choice([1, 3, 5]), alpha=b.uniform(1e-4, 1e-2), beta=b.uniform(0.5, 1),
               bias=b.uniform(1, 2))


def function_normalization(b: Builder) -> None:
    """The normalizations ONNX defines as functions: GroupNormalization (opset 21: a scale and a bias per
    channel), RMSNormalization (opset 23: over the axes from `axis` on) and MeanVarianceNormalization. ONNX's
    MeanVarianceNormalization takes the variance as E[x^2] - E[x]^2, which cancels where the mean is large
    against the spread: only of an exact value (the same inputs in cglow and onnxruntime), over 4 elements or more
    (random normal ones, rarely all close)."""
    op = b.choice(["GroupNormalization", "RMSNormalization", "MeanVarianceNormalization"])
    x = b.pick(lambda v: v.rank >= 2, exact=op == "MeanVarianceNormalization")
    if op == "GroupNormalization" and x.rank >= 3:
        c = x.shape[1]
        groups = b.choice([g for g in range(1, c + 1) if c % g == 0])
        b.node(op, [x.name, b.weights(c), b.weights(c)], num_groups=groups, epsilon=b.uniform(1e-5, 1e-2),
               shape=x.shape)
    elif op == "RMSNormalization":
        axis = b.int(-x.rank, x.rank - 1)
        normalized = x.shape[axis:]
        scale = b.weights(*(1 if b.chance(0.3) else d for d in normalized[b.int(0, len(normalized) - 1):]))
        b.node(op, [x.name, scale], axis=axis, epsilon=b.uniform(1e-5, 1e-2))
    elif op == "MeanVarianceNormalization":
        axes = [0, 2, 3] if x.rank == 4 and b.chance(0.3) else \
            sorted({b.int(0, x.rank - 1) for _ in range(b.int(1, x.rank))})
        if np.prod([x.shape[a] for a in axes]) < 4:
            raise Rejected("too few elements for a variance")
        b.node(op, [x.name], axes=axes)  # not the default ones: ONNX cannot infer its body's shapes then


def determinant(b: Builder) -> None:
    """Det of a value's last two dims cut square, up to 16 x 16 (what cglow's decomposition computes: Gaussian
    elimination, graph/decompose.py _det)."""
    x = b.pick(lambda v: v.rank >= 2)
    m = b.int(1, min(16, *x.shape[-2:]))
    (square,) = b.node("Slice", [x.name, b.const(np.array([0, 0], np.int64)), b.const(np.array([m, m], np.int64)),
                                 b.const(np.array([-2, -1], np.int64))])
    b.node("Det", [square.name])


def softmax(b: Builder) -> None:
    x = b.pick(lambda v: v.rank >= 1)
    op = b.choice(["Softmax", "LogSoftmax", "Softmax"] + (["Hardmax"] if x.exact else []))
    b.node(op, [x.name], axis=b.int(-x.rank, x.rank - 1), exact=op == "Hardmax")


def reduce(b: Builder) -> None:
    x = b.pick(lambda v: v.rank >= 1, empty=True)
    op = b.choice(["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                   "ReduceLogSumExp", "ReduceSumSquare", "ReduceLogSum"])
    data = positive(b, x) if op == "ReduceLogSum" else x.name
    axes = sorted({b.int(-x.rank, x.rank - 1) % x.rank for _ in range(b.int(1, x.rank))})
    keep = b.int(0, 1)
    exact = x.exact and op in ("ReduceMax", "ReduceMin")
    b.node(op, [data] + ([b.const(np.array(axes, np.int64))] if b.chance(0.8) else []), keepdims=keep, exact=exact)


def arg_reduce(b: Builder) -> None:
    x = b.pick(lambda v: v.rank >= 1, exact=True)
    (i,) = b.node(b.choice(["ArgMax", "ArgMin"]), [x.name], axis=b.int(-x.rank, x.rank - 1),
                  keepdims=b.int(0, 1), select_last_index=b.int(0, 1), exact=True)
    b.node("Cast", [i.name], to=T.FLOAT, exact=True)


def cumsum(b: Builder) -> None:
    x = b.pick(lambda v: v.rank >= 1)
    b.node("CumSum", [x.name, b.const(np.array(b.int(-x.rank, x.rank - 1), np.int64))], exclusive=b.int(0, 1),
           reverse=b.int(0, 1))


def topk(b: Builder) -> None:
    x = b.pick(lambda v: v.rank >= 1)
    axis = b.int(-x.rank, x.rank - 1)
    k = b.const(np.array([b.int(1, x.shape[axis])], np.int64))
    values, indices = b.node("TopK", [x.name, k], outputs=2, axis=axis, largest=b.int(0, 1), exact=x.exact)
    if x.exact:
        b.node("Cast", [indices.name], to=T.FLOAT, exact=True)


def recurrent(b: Builder) -> None:
    x = b.pick(lambda v: v.rank == 3)
    op = b.choice(["RNN", "GRU", "LSTM"])
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    hidden, directions = b.int(1, 4), b.int(1, 2)
    size = x.shape[2]
    inputs = [x.name, b.weights(directions, gates * hidden, size, scale=0.5),
              b.weights(directions, gates * hidden, hidden, scale=0.5)]
    if b.chance(0.7):
        inputs.append(b.weights(directions, 2 * gates * hidden, scale=0.5))
    attrs = dict(hidden_size=hidden, direction=b.choice(["forward", "reverse"]) if directions == 1 else "bidirectional")
    if op == "GRU":
        attrs["linear_before_reset"] = b.int(0, 1)
    b.node(op, inputs, outputs=2, **attrs)


GENERATORS = [(matmul, 4), (gemm, 2), (conv, 5), (conv_transpose, 1), (pool, 3), (global_pool, 1), (batch_norm, 2),
              (normalization, 2), (function_normalization, 2), (determinant, 1), (softmax, 2), (reduce, 3),
              (arg_reduce, 1), (cumsum, 1), (topk, 1), (recurrent, 1)]
