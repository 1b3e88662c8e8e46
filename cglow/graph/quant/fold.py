"""QDQ folding: a float op whose inputs are dequantized and whose output is quantized becomes an integer op.

Each QuantizeLinear is the anchor. Its producer (through a Relu or Clip, which becomes the integer op's
clamp) is matched against the integer ops cglow has; the op's inputs must come from DequantizeLinear nodes
with constant parameters. What does not match stays as it is: the float op runs between a dequantize and
a quantize map, exactly as the QDQ form specifies. Before that, a dequantize moves past the data-movement
ops that read it (Reshape, Transpose...), so that the integers flow through them, or, of constant weights,
those ops apply to the integers at once (moved_weights.py)."""
from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
import math

import numpy as np

from ..edit import Site, rewrite_each
from ..fold_batchnorm import affine
from ..ir import Graph, Node, TensorType
from ..registry import int8_form
from .affine import integer_affine
from .moved_weights import moved_weights
from .movement import moves
from .params import QParams, clamp_bounds, dequantized, float32_multipliers, narrow, qparams, requant_attrs
from .pool import int_average, int_mean
from .shifted import unshifted
from .softmax import int_softmax
from .table import table

CLAMPED = {"conv", "gemm", "binary", "batchnorm"}  # int8 forms that take a Relu or Clip after them as their clamp
ADD_BITS = 21  # IntAdd: the larger scale ratio is a factor in [2**21, 2**22]


def _real_const(site: Site, name: str) -> np.ndarray | None:
    """A constant's real values: a float constant, or the dequantized values of an integer constant."""
    data = site.const(name)
    if data is not None:
        return data.astype(np.float64) if data.dtype == np.float32 else None
    d = dequantized(site, name)
    q = site.const(d.source) if d else None
    if q is None:
        return None
    shape = [1] * q.ndim
    if d.p.axis is not None:
        shape[d.p.axis] = -1
    return (q.astype(np.int64) - d.p.zero.reshape(shape)) * d.p.scale.reshape(shape)


class _Build:
    """What a fold adds: new constants and values, with fresh names."""

    def __init__(self, site: Site):
        self.site, self.taken, self.consts, self.types = site, set(), {}, {}

    def const(self, base: str, data: np.ndarray) -> str:
        name = self.site.fresh(base, self.taken)
        self.consts[name] = data
        return name

    def value(self, base: str, type_: TensorType) -> str:
        """A value that an added node computes."""
        name = self.site.fresh(base, self.taken)
        self.types[name] = type_
        return name


def _requant_float32(out: QParams, a_scale: float, b_scales: np.ndarray, bounds: tuple[int, int]) -> dict:
    """The requantization of a product of a and b as onnxruntime's QLinearConv and QLinearMatMul compute it:
    by the float32 factor a_scale * b_scale / y_scale, in float32, rounding float32 products."""
    f32 = np.float32
    factors = f32(a_scale) * b_scales.astype(f32) / f32(out.scale[0])
    zero = int(out.zero[0])
    mult, shift = float32_multipliers(factors, bounds[0] - zero, bounds[1] - zero, shared=True)
    return dict(mult=mult, shift=shift, y_zero=zero, lo=bounds[0], hi=bounds[1])


def _bias(real: np.ndarray | None, acc_scale: np.ndarray, size: int) -> np.ndarray | None:
    """A real bias (None: none) in accumulator units (int32), or None if it does not fit."""
    if real is None:
        return np.zeros(size, np.int32)
    q = np.rint(np.broadcast_to(real.reshape(-1), (size,)) / acc_scale)
    return q.astype(np.int32) if np.all(np.abs(q) < 2 ** 31 - 1) else None


def _plus(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    """Two real biases (None: none) as one."""
    return b if a is None else a if b is None else a.reshape(-1) + b.reshape(-1)


def _conv(b: _Build, op: Node, out: QParams, bounds, added: np.ndarray | None = None) -> Node | None:
    """Conv; `added`: the real per-channel bias of an Add after it (biased)."""
    site = b.site
    x, w = dequantized(site, op.inputs[0]), dequantized(site, op.inputs[1])
    weights = site.const(w.source) if w else None
    if x is None or weights is None or not x.p.per_tensor or w.p.axis not in (None, 0):
        return None
    m = weights.shape[0]
    zero = np.broadcast_to(w.p.zero, (m,)).reshape((m,) + (1,) * (weights.ndim - 1))
    acc_scale = x.p.scale[0] * np.broadcast_to(w.p.scale, (m,))
    name = op.inputs[2] if len(op.inputs) > 2 else ""
    own = _real_const(site, name) if name else None
    bias = None if name and own is None else _bias(_plus(own, added), acc_scale, m)
    if bias is None:
        return None
    inputs = (x.source, b.const(f"{op.name}/w_int", narrow(weights.astype(np.int64) - zero)),
              b.const(f"{op.name}/b_int", bias))
    attrs = {**op.attrs, "x_zero": int(x.p.zero[0]),
             **_requant_float32(out, x.p.scale[0], np.broadcast_to(w.p.scale, (m,)), bounds)}
    return Node("IntConv", op.name, inputs, (), attrs)


def _gemm(b: _Build, op: Node, out: QParams, bounds, added: np.ndarray | None = None) -> Node | None:
    """Gemm, or MatMul: b constant (per-tensor or per-column parameters) or computed (per-tensor); `added`: the
    real per-column bias of an Add after it (biased)."""
    site = b.site
    a, bd = dequantized(site, op.inputs[0]), dequantized(site, op.inputs[1])
    if a is None or bd is None or not a.p.per_tensor:
        return None
    alpha, beta = op.attr("alpha", 1.0), op.attr("beta", 1.0)
    trans_b = op.attr("transB", 0)
    b_shape = site.shape(bd.source)
    n = b_shape[-2] if trans_b else b_shape[-1]
    column_axis = len(b_shape) - (2 if trans_b else 1)
    weights = site.const(bd.source)
    if alpha <= 0 or (weights is None and not bd.p.per_tensor) or bd.p.axis not in (None, column_axis):
        return None
    acc_scale = alpha * a.p.scale[0] * np.broadcast_to(bd.p.scale, (n,))
    c = op.inputs[2] if len(op.inputs) > 2 and beta != 0 else ""
    if c and site.shape(c) not in ((n,), (1, n), (1,), ()):
        return None
    own = _real_const(site, c) if c else None
    bias = None if c and own is None else _bias(_plus(None if own is None else own * beta, added), acc_scale, n)
    if bias is None:
        return None
    requant = _requant_float32(out, a.p.scale[0], np.broadcast_to(bd.p.scale, (n,)), bounds) if alpha == 1 else \
        requant_attrs(out, acc_scale / out.scale[0], bounds)
    attrs = {"transA": op.attr("transA", 0), "transB": trans_b, "a_zero": int(a.p.zero[0]), "b_zero": 0, **requant}
    if weights is None:
        right = bd.source
        attrs["b_zero"] = int(bd.p.zero[0])
    else:
        shape = [1] * weights.ndim
        shape[column_axis] = -1
        zero = np.broadcast_to(bd.p.zero, (n,)).reshape(shape)
        right = b.const(f"{op.name}/w_int", narrow(weights.astype(np.int64) - zero))
    bias = np.broadcast_to(bias, (n,)).astype(np.int32)
    return Node("IntGemm", op.name, (a.source, right, b.const(f"{op.name}/b_int", bias)), (), attrs)


def _binary(b: _Build, op: Node, out: QParams, bounds) -> Node | None:
    """Add: y = zy + round(((a - za) fa + (b - zb) fb) unit), halves to even as QuantizeLinear rounds them (unit
    is the requantization's factor), where the integers fa and fb are the ratios sa / sy and sb / sy (exact
    rationals of the scales) in units of unit, rounded, the larger in [2**21, 2**22] so that the sum fits in
    int32. unit is a power of two when that makes either factor exact (both, for ratios such as 1/2 and 3/4:
    then y is the real sum rounded, to the bit), else the larger ratio / 2**22, which the multiplier holds to
    31 bits. The factors' rounding, in all below 255 / 2**22 of the larger ratio, can put a value that close to
    a half (or at one) on the wrong side of it, and when unit is not a power of two an exact half (scales 1,
    0.5 and 3 make them) may round away from even. The float model rounds its float32 products and sum, and
    onnxruntime's QLinearAdd on x86-64 (AVX2) computes in float32 too, adding zy before it rounds: both agree
    with cglow to the bit where their float32 arithmetic is exact (QLinearAdd at halves only if zy is even).
    Mul: y = zy + sa sb / sy (a - za)(b - zb)."""
    site = b.site
    x, y = dequantized(site, op.inputs[0]), dequantized(site, op.inputs[1])
    if x is None or y is None or not x.p.per_tensor or not y.p.per_tensor:
        return None
    sa, sb, sy = x.p.scale[0], y.p.scale[0], out.scale[0]
    attrs = {"a_zero": int(x.p.zero[0]), "b_zero": int(y.p.zero[0])}
    if op.op == "Add":
        ratios = Fraction(sa) / Fraction(sy), Fraction(sb) / Fraction(sy)
        unit = Fraction(2) ** (math.frexp(float(max(ratios)))[1] - 1 - ADD_BITS)
        if all((r / unit).denominator != 1 for r in ratios):
            unit = max(ratios) / 2 ** (ADD_BITS + 1)
        if unit > 1:  # the requantized sum, up to 255 * 2**23 * unit, must fit in int32
            return None
        attrs.update(a_factor=round(ratios[0] / unit), b_factor=round(ratios[1] / unit),
                     **requant_attrs(out, np.array([float(unit)]), bounds))
    else:
        attrs.update(requant_attrs(out, np.array([sa * sb / sy]), bounds))
    return Node(f"Int{op.op}", op.name, (x.source, y.source), (), attrs)


def _batchnorm(b: _Build, op: Node, out: QParams, bounds) -> Node | None:
    """Inference BatchNormalization on 8-bit values: a per-channel affine map in integers (affine.py)."""
    site = b.site
    x = dequantized(site, op.inputs[0])
    params = [site.const(n) for n in op.inputs[1:5]]
    if x is None or not x.p.per_tensor or x.p.dtype.itemsize != 1 or any(p is None for p in params) or \
            any(op.outputs[1:]) or op.attr("training_mode", 0) or len(site.shape(x.source)) < 2:
        return None
    found = affine(*params, op.attr("epsilon", 1e-5))
    if found is None:
        return None
    zero = int(x.p.zero[0])
    info = np.iinfo(x.p.dtype)
    factor, offset, unit = integer_affine(*found, x.p, out, max(zero - int(info.min), int(info.max) - zero))
    inputs = (x.source, b.const(f"{op.name}/factor", factor), b.const(f"{op.name}/offset", offset))
    return Node("IntAffine", op.name, inputs, (), {"x_zero": zero, **requant_attrs(out, unit, bounds)})


def _table(b: _Build, op: Node, out: QParams, bounds) -> Node | None:
    """A unary op (or a bare requantization) on 8-bit values: a table of its 256 results."""
    source = op if op.op == "DequantizeLinear" else b.site.producer.get(op.inputs[0])
    x = dequantized(b.site, source.outputs[0]) if source is not None else None
    if x is None or not x.p.per_tensor or x.p.dtype.itemsize != 1:
        return None
    if op.op == "DequantizeLinear" and x.p.same(out):
        return Node("Identity", op.name, (x.source,), (), {})
    values = table(b.site, op, x.p, out)
    if values is None:
        return None
    return Node("IntTable", op.name, (x.source, b.const(f"{op.name}/table", values)), (), {})


def _movement(b: _Build, op: Node, out: QParams, bounds) -> Node | None:
    """An op that moves values works on the integers when they share the output's parameters; Concat
    first requantizes the inputs that do not (through a table)."""
    site = b.site
    data = range(len(op.inputs)) if op.op == "Concat" else (0,)
    if len([o for o in op.outputs if o]) != 1:
        return None
    inputs = list(op.inputs)
    extra: list[Node] = []
    for i in data:
        x = dequantized(site, op.inputs[i])
        if x is None:
            return None
        inputs[i] = x.source
        if not x.p.same(out):
            if op.op != "Concat" or x.p.dtype.itemsize != 1 or not x.p.per_tensor:
                return None
            rescaled = b.value(f"{op.inputs[i]}/requantized", replace(site.graph.types[x.source], dtype=out.dtype))
            extra.append(Node("IntTable", f"{op.name}/requantize{i}",
                              (x.source, b.const(f"{op.name}/table{i}", table(site, x.node, x.p, out))),
                              (rescaled,), {}))
            inputs[i] = rescaled
    node = replace(op, inputs=tuple(inputs), outputs=())
    return node if not extra else (extra, node)


FORMS = {"conv": _conv, "gemm": _gemm, "binary": _binary, "batchnorm": _batchnorm, "average": int_average,
         "mean": int_mean, "softmax": int_softmax, "table": _table, "movement": _movement}  # by OpSpec.int8


def _activation(site: Site, node: Node) -> tuple[float | None, float | None] | None:
    """The real clamp of a Relu or a Clip with constant bounds, else None."""
    if node.op == "Relu":
        return 0.0, None
    if node.op != "Clip":
        return None
    if "min" in node.attrs or "max" in node.attrs:  # before opset 11
        return node.attr("min"), node.attr("max")
    bounds = []
    for i in (1, 2):
        name = node.inputs[i] if len(node.inputs) > i else ""
        value = site.const(name) if name else None
        if name and value is None:
            return None
        bounds.append(None if value is None else float(value.reshape(-1)[0]))
    return bounds[0], bounds[1]


BIASED = {"Conv": 1, "Gemm": -1, "MatMul": -1}  # the axis of their output's channels


def biased(site: Site, add: Node) -> tuple[Node, np.ndarray] | None:
    """An Add of a constant bias after a Conv, Gemm or MatMul (tf2onnx writes a dense layer's bias so: an
    int32 constant through a DequantizeLinear): the product and the bias's real values per channel. The
    constant must vary along the channels at most, and not broadcast the product to a larger shape."""
    for i in (0, 1):
        product = site.producer.get(add.inputs[i])
        real = _real_const(site, add.inputs[1 - i])
        if product is None or product.op not in BIASED or real is None or site.sole_reader(add.inputs[i]) is not add:
            continue
        shape = site.shape(add.inputs[i])
        if site.shape(add.outputs[0]) != shape or real.ndim > len(shape):
            return None
        axis = BIASED[product.op] % len(shape)
        real = real.reshape((1,) * (len(shape) - real.ndim) + real.shape)
        if any(d != 1 for a, d in enumerate(real.shape) if a != axis):
            return None
        return product, real.reshape(-1)
    return None


def _fold(site: Site, q: Node) -> Graph | None:
    if q.op != "QuantizeLinear":
        return None
    out = qparams(site, q)
    op = site.producer.get(q.inputs[0])
    if out is None or not out.per_tensor or out.dtype.itemsize != 1 or op is None or \
            (op.op != "DequantizeLinear" and site.sole_reader(q.inputs[0]) is not q):
        return None
    dropped = [op]
    bounds = out.bounds
    clamp = _activation(site, op)
    inner = site.producer.get(op.inputs[0]) if clamp else None
    if inner is not None and int8_form(inner.op) in CLAMPED and site.sole_reader(op.inputs[0]) is op:
        bounds = clamp_bounds(out, *clamp)
        op = inner
        dropped.append(op)
    b = _Build(site)
    layer = biased(site, op) if op.op == "Add" else None
    if layer is not None:
        product, added = layer
        dropped.append(product)
        built = FORMS[int8_form(product.op)](b, product, out, bounds, added)
    else:
        build = FORMS.get(int8_form(op.op))
        built = build(b, op, out, bounds) if build else None
    if built is None:
        return None
    extra, node = built if isinstance(built, tuple) else ([], built)
    node = replace(node, outputs=(q.outputs[0],))
    graph = site.rewritten([(d, None) for d in dropped if d.op != "DequantizeLinear"], b.consts)
    at = next(i for i, n in enumerate(graph.nodes) if n is q)  # after every input's producer, before q's readers
    return graph.with_nodes(graph.nodes[:at] + tuple(extra) + (node,) + graph.nodes[at + 1:],
                            types={**graph.types, **b.types})


def _sink(site: Site, node: Node) -> Graph | None:
    """A per-tensor DequantizeLinear read only by a data-movement op (as its data) moves after it."""
    d = dequantized(site, node.inputs[0])
    if d is None or not d.p.per_tensor or site.sole_reader(node.inputs[0]) is not node:
        return None
    moved = site.fresh(f"{node.outputs[0]}/quantized", set())
    shape = site.shape(node.outputs[0])
    first = replace(node, inputs=(d.source,) + node.inputs[1:], outputs=(moved,))
    then = replace(d.node, inputs=(moved,) + d.node.inputs[1:], outputs=node.outputs)
    graph = site.rewritten([(d.node, None), (node, first)])
    nodes = list(graph.nodes)
    nodes.insert(nodes.index(first) + 1, then)
    types = {**graph.types, moved: replace(graph.types[d.source], shape=shape)}
    return replace(graph.with_nodes(nodes), types=types)


def _move(site: Site, node: Node) -> Graph | None:
    """Integer weights moved now (moved_weights.py), else a dequantize moved after the op (_sink)."""
    if not moves(node):
        return None
    return moved_weights(site, node) or _sink(site, node)


def fold_qdq(graph: Graph) -> Graph:
    return rewrite_each(rewrite_each(rewrite_each(graph, unshifted), _move), _fold)


def fold_dequantized_consts(graph: Graph) -> Graph:
    """A DequantizeLinear of a constant that no integer op took (a weight of an op kept in float): its float
    values, computed now."""
    site = Site(graph)
    consts = dict(graph.consts)
    kept = []
    for node in graph.nodes:
        real = _real_const(site, node.outputs[0]) if node.op == "DequantizeLinear" else None
        if real is None:
            kept.append(node)
        else:
            consts[node.outputs[0]] = real.astype(np.float32)
    return replace(graph.with_nodes(kept), consts=consts)
