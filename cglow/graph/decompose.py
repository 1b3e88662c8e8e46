"""Ops that cglow compiles as a few others, built per node before import (as graph/functions.py does with ONNX's
function bodies, where ONNX gives none): LpPool as the p-th root of a sum pool of |x|^p, DFT as matrix
products of the signal by constant cosine and sine matrices, STFT as frames' DFTs, ReverseSequence as a
GatherElements, Det by Gaussian elimination (up to MAX_DET), AffineGrid as a MatMul of constant coordinates,
TfIdfVectorizer as counts of matches (graph/ngrams.py), BatchNormalization in training mode by the batch's
statistics; GridSample, RoiAlign and DeformConv as gathers at the positions they compute (graph/sampling.py).
SHAPE_INPUTS names the inputs that must be constants (the backend pins them, tools/backend.py)."""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import onnx
from onnx import helper

from ..errors import CglowError
from .builder import Builder, attrs_of, given, named
from .geometry import window
from .inferred import value_shapes
from .limits import read_tensor
from .ngrams import tfidf_vectorizer
from .sampling import SAMPLING
from .volumetric import VOLUMETRIC, declared_ranks, ir_node, volumetric

SHAPE_INPUTS = {"DFT": (1, 2), "STFT": (1, 3), "AffineGrid": (1,)}


def _lp_pool(b: Builder, shapes: dict, consts: dict) -> None:
    """(sum over the window of |x|^p)^(1/p): an AveragePool of the input's elements (count_include_pad=0) times
    how many of them each window holds. Not the kernel's size: a last window of ceil_mode may reach past the end
    padding, where an AveragePool counting the padding divides by less."""
    node = b.node
    attrs = attrs_of(node)
    p = float(attrs.pop("p", 2))
    shape = shapes.get(node.input[0])
    if shape is None:
        raise CglowError(f"{named(node)}: its input's shape must be static")
    win = window(ir_node(node), tuple(shape[2:]), tuple(attrs["kernel_shape"]), bool(attrs.get("ceil_mode", 0)))
    count = np.ones((), np.float32)
    for size, k, s, d, begin, out in zip(shape[2:], win.kernel, win.strides, win.dilations, win.pads_begin, win.out):
        taps = np.arange(out)[:, None] * s + np.arange(k)[None, :] * d - begin
        count = np.multiply.outer(count, ((taps >= 0) & (taps < size)).sum(axis=1).astype(np.float32))
    powered = b.add("Pow", [b.add("Abs", [node.input[0]]), b.const(np.array(p, np.float32))])
    mean = b.add("AveragePool", [powered], count_include_pad=0, **attrs)
    total = b.add("Mul", [mean, b.const(count)])
    b.add("Pow", [total, b.const(np.array(1 / p, np.float32))], node.output[0])


def _dft(b: Builder, shapes: dict, consts: dict) -> None:
    """The transform along `axis` of a real ([..., 1]) or complex ([..., 2]) signal, dft_length samples (the
    signal cut or padded with zeros to it): Re = xr C + xi S, Im = xi C - xr S with C, S the cosines and sines
    of 2 pi j k / length (the inverse: their conjugates over length); onesided, the first length / 2 + 1
    frequencies, or, inverse, a real signal from them (length 2 (n - 1) unless given; each frequency but the first
    and the middle one counted twice, for its conjugate)."""
    node, attrs = b.node, attrs_of(b.node)
    shape = shapes.get(node.input[0])

    def const(i: int):
        return given(node, i, consts)
    if shape is None or any(len(node.input) > i and node.input[i] and const(i) is None for i in (1, 2)):
        raise CglowError(f"{named(node)}: its input's shape, dft_length and axis must be static")
    rank = len(shape)
    axis = int(const(2).reshape(-1)[0]) if b.opset >= 20 and const(2) is not None else \
        -2 if b.opset >= 20 else attrs.get("axis", 1)  # an input from opset 20, an attribute before
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < rank - 1 or shape[-1] not in (1, 2):
        raise CglowError(f"{named(node)}: axis {axis} of a [..., 1 or 2] signal of rank {rank}")
    inverse, onesided = attrs.get("inverse", 0), attrs.get("onesided", 0)
    n = shape[axis]
    real_out = inverse and onesided  # the inverse of half a spectrum: a real signal
    length = int(const(1).reshape(-1)[0]) if const(1) is not None else 2 * (n - 1) if real_out else n
    if length < 1:
        raise CglowError(f"{named(node)}: a transform of {length} samples (an inverse of half a spectrum of one "
                         f"frequency is of 2 (n - 1) = 0 unless dft_length says)")
    used = min(n, length // 2 + 1) if real_out else min(n, length)
    k = length // 2 + 1 if onesided and not real_out else length
    perm = [d for d in range(rank - 1) if d != axis] + [axis, rank - 1]
    x = b.add("Transpose", [node.input[0]], perm=perm)  # [..., n, 1 or 2]
    x = b.add("Slice", [x, b.const(np.array([0], np.int64)), b.const(np.array([used], np.int64)),
                        b.const(np.array([-2], np.int64))])

    def part(i: int) -> str:  # the real or imaginary part, [..., 1, used]
        sliced = b.add("Slice", [x, b.const(np.array([i], np.int64)), b.const(np.array([i + 1], np.int64)),
                                 b.const(np.array([-1], np.int64))])
        return b.add("Transpose", [sliced], perm=list(range(rank - 2)) + [rank - 1, rank - 2])
    angle = 2 * np.pi * np.outer(np.arange(used), np.arange(k)) / length
    scale = np.full((used, 1), 1 / length if inverse else 1.0)
    if real_out:  # each frequency but 0 and length / 2 stands for its conjugate too
        scale[1:] *= 2
        if length % 2 == 0 and used > length // 2:
            scale[length // 2] /= 2
    cos, sin = (b.const((f(angle) * scale).astype(np.float32)) for f in (np.cos, np.sin))
    real = part(0)
    re, im = b.add("MatMul", [real, cos]), b.add("MatMul", [real, sin])  # [..., 1, k]
    im = im if inverse else b.add("Neg", [im])  # e^(-i angle) forward, e^(+i angle) inverse
    if shape[-1] == 2:
        imag = part(1)
        re = b.add("Sub" if inverse else "Add", [re, b.add("MatMul", [imag, sin])])
        im = b.add("Add", [im, b.add("MatMul", [imag, cos])])
    pair = re if real_out else b.add("Concat", [re, im], axis=-2)  # [..., 2 (or 1, real), k]
    back = [0] * rank
    for position, d in enumerate(perm):
        back[d] = position
    swapped = b.add("Transpose", [pair], perm=list(range(rank - 2)) + [rank - 1, rank - 2])  # [..., k, 2]
    b.add("Transpose", [swapped], node.output[0], perm=back)


def _stft(b: Builder, shapes: dict, consts: dict) -> None:
    """The signal [batch, n, 1 or 2] cut into frames of frame_length samples (the window's length where it has
    one) every frame_step (a Gather of constant indices), times the window, each frame's DFT (_dft; one-sided
    unless onesided=0): [batch, frames, bins, 2]."""
    node, attrs = b.node, attrs_of(b.node)
    shape = shapes.get(node.input[0])

    def const(i: int):
        return given(node, i, consts)
    window = node.input[2] if len(node.input) > 2 and node.input[2] else None
    length = int(const(3).reshape(-1)[0]) if const(3) is not None else shapes.get(window, (None,))[0]
    if shape is None or const(1) is None or length is None:
        raise CglowError(f"{named(node)}: the signal's shape, frame_step and the frame length must be static")
    step = int(const(1).reshape(-1)[0])
    frames = 1 + (shape[1] - length) // step
    index = np.arange(frames, dtype=np.int64)[:, None] * step + np.arange(length, dtype=np.int64)[None, :]
    framed = b.add("Gather", [node.input[0], b.const(index)], axis=1)  # [batch, frames, length, 1 or 2]
    if window:
        framed = b.add("Mul", [framed, b.add("Reshape", [window, b.const(np.array([1, 1, length, 1], np.int64))])])
    axis = b.const(np.array(2, np.int64))
    dft = helper.make_node("DFT", [framed, "", axis], [node.output[0]], onesided=attrs.get("onesided", 1))
    inner = Builder(dft, b.prefix + "dft/", max(b.opset, 20))
    _dft(inner, {**shapes, framed: (shape[0], frames, length, shape[2])}, {**consts, axis: np.array(2, np.int64)})
    b.nodes += inner.nodes


def _reverse_sequence(b: Builder, shapes: dict, consts: dict) -> None:
    """out[b, t] = x[b, length[b] - 1 - t] for t < length[b], else x[b, t]: GatherElements along the time axis,
    its indices computed from the lengths (a run-time input) and the time steps (a constant)."""
    node, attrs = b.node, attrs_of(b.node)
    shape = shapes.get(node.input[0])
    if shape is None:
        raise CglowError(f"{named(node)}: its input's shape must be static")
    batch, time = attrs.get("batch_axis", 1), attrs.get("time_axis", 0)
    steps = np.arange(shape[time], dtype=np.int64).reshape([-1 if d == time else 1 for d in range(len(shape))])
    lengths = b.add("Reshape", [node.input[1], b.const(np.array([-1 if d == batch else 1 for d in range(len(shape))],
                                                                 np.int64))])
    t = b.const(steps)
    reversed_ = b.add("Sub", [b.add("Sub", [lengths, b.const(np.array(1, np.int64))]), t])
    index = b.add("Where", [b.add("Less", [t, lengths]), reversed_, t])
    index = b.add("Expand", [index, b.const(np.array(shape, np.int64))])
    b.add("GatherElements", [node.input[0], index], node.output[0], axis=time)


MAX_DET = 16  # the largest matrices whose determinant is computed: the elimination's steps are unrolled


def _det(b: Builder, shapes: dict, consts: dict) -> None:
    """The determinant of [..., m, m] matrices (m up to MAX_DET) by Gaussian elimination with partial pivoting, as
    LAPACK's LU factorization computes it (numpy.linalg.det, onnxruntime's): at each step j, the row of the column's
    largest magnitude from j down swapped into row j (a GatherElements; a swap negates the determinant), the
    determinant multiplied by the pivot, and the rows below less their multiples of row j. A zero pivot (its column
    zero from j down: the matrix is singular) divides by one, so that the product stays 0, not NaN. The steps are
    unrolled: no loop."""
    node = b.node
    shape = shapes.get(node.input[0])
    if shape is None or len(shape) < 2 or shape[-1] != shape[-2] or shape[-1] > MAX_DET:
        raise CglowError(f"{named(node)}: the determinant of square matrices up to {MAX_DET} x {MAX_DET} of a static "
                         f"shape is supported, not of {list(shape) if shape else 'an unknown shape'}")
    m, a = shape[-1], node.input[0]

    def ints(*values: int) -> str:
        return b.const(np.array(values, np.int64))

    def value(v: float) -> str:  # of the input's element type
        return b.add("CastLike", [b.const(np.array(v, np.float32)), node.input[0]])

    def rows(matrix: str, lo: int, hi: int) -> str:
        return b.add("Slice", [matrix, ints(lo), ints(hi), ints(-2)])
    det, rows_index = None, b.const(np.arange(m, dtype=np.int64).reshape(m, 1))
    for j in range(m):
        column = b.add("Slice", [a, ints(j, j), ints(m, j + 1), ints(-2, -1)])  # [..., m - j, 1]
        pivot_row = b.add("Add", [b.add("ArgMax", [b.add("Abs", [column])], axis=-2, keepdims=1), ints(j)])
        at_j = b.add("Equal", [rows_index, ints(j)])
        index = b.add("Where", [at_j, pivot_row, b.add("Where", [b.add("Equal", [rows_index, pivot_row]), ints(j),
                                                                    rows_index])])  # [..., m, 1]: rows j, p swapped
        a = b.add("GatherElements", [a, b.add("Expand", [index, ints(*shape)])], axis=-2)
        pivot = b.add("Slice", [a, ints(j, j), ints(j + 1, j + 1), ints(-2, -1)])  # [..., 1, 1]
        swapped = b.add("Where", [b.add("Equal", [pivot_row, ints(j)]), pivot, b.add("Neg", [pivot])])
        det = swapped if det is None else b.add("Mul", [det, swapped])
        if j + 1 < m:
            below = rows(a, j + 1, m)
            lead = b.add("Slice", [below, ints(j), ints(j + 1), ints(-1)])  # [..., m - j - 1, 1]
            safe = b.add("Where", [b.add("Equal", [pivot, value(0)]), value(1), pivot])
            below = b.add("Sub", [below, b.add("Mul", [b.add("Div", [lead, safe]), rows(a, j, j + 1)])])
            a = b.add("Concat", [rows(a, 0, j + 1), below], axis=-2)
    b.add("Reshape", [det, b.const(np.array(shape[:-2], np.int64))], node.output[0])


def _affine_grid(b: Builder, shapes: dict, consts: dict) -> None:
    """The sampling grid [N, (D,) H, W, 2 or 3] of 2-D (theta [N, 2, 3]) or 3-D (theta [N, 3, 4]) affine
    transforms: each position's normalized coordinates (x, y(, z), 1), a constant, times theta transposed (one
    MatMul). Not the ONNX function body: that squeezes every dim of 1 of theta's rows, the batch's too, and so
    cannot take a 2-D batch of one."""
    node = b.node
    size = given(node, 1, consts)
    if size is None:
        raise CglowError(f"{named(node)}: its size must be constant")
    n, _, *spatial = (int(d) for d in size.reshape(-1))
    align = attrs_of(node).get("align_corners", 0)
    axes = [np.linspace(-1, 1, d) if align else (2 * np.arange(d) + 1) / d - 1 for d in spatial]
    coords = np.meshgrid(*axes, indexing="ij")[::-1]  # x along the last dim (W), then y, z
    base = np.stack([c.reshape(-1) for c in coords] + [np.ones(math.prod(spatial))], axis=1).astype(np.float32)
    theta = b.add("Transpose", [node.input[0]], perm=[0, 2, 1])
    grid = b.add("MatMul", [b.const(base), theta])  # [N, positions, 2 or 3]
    b.add("Reshape", [grid, b.const(np.array([n, *spatial, len(spatial)], np.int64))], node.output[0])


def _training_batchnorm(b: Builder, shapes: dict, consts: dict) -> None:
    """Training mode: normalized by the batch's own mean and (population) variance over every dim but the channels';
    the running statistics, if asked for, moved towards them by (1 - momentum)."""
    node = b.node
    attrs = attrs_of(node)
    x, scale, bias, mean, var = node.input[:5]
    rank = len(shapes[x])
    axes = [d for d in range(rank) if d != 1]
    per_channel = np.array([1, -1] + [1] * (rank - 2), np.int64)

    def reduce_mean(v: str) -> str:
        if b.opset >= 18:
            return b.add("ReduceMean", [v, b.const(np.array(axes, np.int64))], keepdims=0)
        return b.add("ReduceMean", [v], axes=axes, keepdims=0)
    batch_mean = reduce_mean(x)
    centered = b.add("Sub", [x, b.add("Reshape", [batch_mean, b.const(per_channel)])])
    batch_var = reduce_mean(b.add("Mul", [centered, centered]))
    std = b.add("Sqrt", [b.add("Add", [batch_var, b.const(np.array(attrs.get("epsilon", 1e-5), np.float32))])])
    gain = b.add("Reshape", [b.add("Div", [scale, std]), b.const(per_channel)])
    b.add("Add", [b.add("Mul", [centered, gain]), b.add("Reshape", [bias, b.const(per_channel)])], node.output[0])
    momentum = attrs.get("momentum", 0.9)
    for out, running, batch in zip(node.output[1:3], (mean, var), (batch_mean, batch_var)):
        if out:
            kept = b.add("Mul", [running, b.const(np.array(momentum, np.float32))])
            b.add("Add", [kept, b.add("Mul", [batch, b.const(np.array(1 - momentum, np.float32))])], out)


def _in_training(node: onnx.NodeProto) -> bool:
    return any(a.name == "training_mode" and a.i for a in node.attribute)


DECOMPOSITIONS: dict[str, Callable[[Builder, dict, dict], None]] = {"Det": _det, "AffineGrid": _affine_grid,
    "LpPool": _lp_pool, "DFT": _dft, "STFT": _stft, "ReverseSequence": _reverse_sequence,
    "TfIdfVectorizer": tfidf_vectorizer, "BatchNormalization": _training_batchnorm, **SAMPLING}
# ops cglow lowers, decomposed in a mode their lowering lacks: the mode's name, and whether a node is in it
MODES = {"BatchNormalization": ("training mode", _in_training)}


def _decomposed(node: onnx.NodeProto, known: set[str]) -> bool:
    return node.op_type in DECOMPOSITIONS and node.domain in ("", "ai.onnx") and \
        (node.op_type not in known or node.op_type in MODES and MODES[node.op_type][1](node))


def decompose(model: onnx.ModelProto, known: set[str], opset: int, max_memory: int) -> onnx.ModelProto:
    """The model (of `opset`) with every node of an op in DECOMPOSITIONS (and not in `known`, or in a mode of MODES),
    and every 3-D Conv and ConvTranspose (graph/volumetric.py), replaced by its decomposition. The constants they may
    read are checked as the import checks them (limits.read_tensor: a malformed one is named, max_memory bounds
    each)."""
    ranks = declared_ranks(model)
    if any(volumetric(n, ranks) is None for n in model.graph.node):  # a convolution's weights of unknown rank
        ranks.update({k: len(v) for k, v in value_shapes(model).items()})

    def replaced(node: onnx.NodeProto) -> Callable[[Builder, dict, dict], None] | None:
        if _decomposed(node, known):
            return DECOMPOSITIONS[node.op_type]
        return VOLUMETRIC[node.op_type] if volumetric(node, ranks) else None
    if not any(replaced(n) for n in model.graph.node):
        return model
    shapes = value_shapes(model)
    consts = {t.name: read_tensor(t, f"initializer '{t.name}'", max_memory) for t in model.graph.initializer}
    consts.update({n.output[0]: read_tensor(a.t, f"the value of Constant node '{n.name}'", max_memory)
                   for n in model.graph.node if n.op_type == "Constant" for a in n.attribute if a.name == "value"})
    nodes = []
    for i, node in enumerate(model.graph.node):
        build = replaced(node)
        if build:
            b = Builder(node, f"{node.name or node.op_type}.{i}/", opset)
            build(b, shapes, consts)
            nodes += b.nodes
        else:
            nodes.append(node)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    return out
