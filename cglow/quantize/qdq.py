"""The QDQ model: QuantizeLinear/DequantizeLinear pairs around the quantized ops of a prepared float model.

- Activations are int8, asymmetric, per tensor: scale = (hi - lo) / 255, zero point round(-128 - lo / scale),
  from the calibrated range (which includes 0). A tensor gets one pair however many nodes read it, and every
  reader (a float op too) reads the pair's DequantizeLinear: the model computes what an int8 runtime would.
  The pair's output keeps the tensor's name (the producer writes a renamed float tensor), so graph outputs stay
  float; a graph input keeps its name and its readers read `<input>_dq`.
- Data movement (Reshape, Flatten, Transpose, Squeeze, Unsqueeze, MaxPool) reuses its input's scale and zero
  point: a compiler can drop its pair.
- Relu or Clip that is the only reader of a Conv, Gemm, MatMul or Add output: the pair goes after the Relu
  or Clip, none between (the activation fuses into the layer).
- Constant weights of Conv (axis 0), Gemm (the output column axis of B) and MatMul (the last axis of B) are
  int8, symmetric in [-127, 127]: scale max|w| / 127 per output channel, or per tensor. Their bias (Conv B,
  Gemm C with alpha = beta = 1) is int32 with scale x_scale * w_scale and zero point 0. No scale is below
  2^-32, and a weight scale is raised where the bias would not fit in int32, so that a channel of zeros gets a
  usable scale and the bias scale stays a normal float32.
- Other constant inputs of quantized ops (an Add's operand) are int8 per tensor like activations, from their
  own range.
- Every other op stays float."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .prepare import subgraph_reads, tensor_types, typed
from ..names import fresh_name

UNARY = ("AveragePool", "GlobalAveragePool", "Relu", "Clip", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid")
SAME_SCALE = ("Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "MaxPool")
ACTIVATIONS: dict[str, tuple[int, ...] | None] = {  # op -> positions of its quantized inputs (None: all)
    **{op: (0,) for op in UNARY + SAME_SCALE}, "Conv": (0, 1), "Gemm": (0, 1), "MatMul": (0, 1),
    "Add": (0, 1), "Mul": (0, 1), "Concat": None}
LAYERS = ("Conv", "Gemm", "MatMul")       # their constant input 1 is a weight, input 2 a bias
FUSING = LAYERS + ("Add",)
FUSED = ("Relu", "Clip")
MIN_SCALE = 2.0 ** -32
INT32_MAX = 2 ** 31 - 1


@dataclass(frozen=True)
class Plan:
    quantized: frozenset[int]      # indices of the nodes computed between DequantizeLinear and QuantizeLinear
    pairs: tuple[str, ...]         # the activation tensors that get a pair, in graph order
    same_scale: dict[str, str]     # a data movement output -> the input whose scale and zero point it reuses

    @property
    def calibrated(self) -> list[str]:
        return [t for t in self.pairs if t not in self.same_scale]


def plan_qdq(model: onnx.ModelProto, keep_float: frozenset[str] = frozenset()) -> Plan:
    """Which nodes of a prepared model are quantized and which tensors get a QuantizeLinear/DequantizeLinear."""
    nodes = model.graph.node
    consts = {t.name: t for t in model.graph.initializer}
    types = tensor_types(model)

    def is_float(name: str) -> bool:
        return name in types and types[name].tensor_type.elem_type == TensorProto.FLOAT

    quantized = frozenset(i for i, node in enumerate(nodes)
                          if node.op_type in ACTIVATIONS and node.domain in ("", "ai.onnx") and
                          not {node.op_type, node.name} & keep_float and is_float(node.output[0]) and
                          all(is_float(name) for name, _ in roles(node, consts).values()))
    readers: dict[str, list[int]] = {}
    for i, node in enumerate(nodes):
        for name in dict.fromkeys(node.input):
            readers.setdefault(name, []).append(i)
    pinned = {v.name for v in model.graph.output} | subgraph_reads(nodes)
    fused = {nodes[i].output[0] for i in quantized if nodes[i].op_type in FUSING and
             nodes[i].output[0] not in pinned and len(r := readers.get(nodes[i].output[0], [])) == 1 and
             r[0] in quantized and nodes[r[0]].op_type in FUSED}
    wanted = set()
    for i in quantized:
        wanted |= {name for name, role in roles(nodes[i], consts).values() if role == "activation"}
        wanted.add(nodes[i].output[0])
    wanted -= fused
    order = [v.name for v in model.graph.input] + [out for node in nodes for out in node.output]
    pairs = tuple(t for t in dict.fromkeys(order) if t in wanted)
    same_scale = {nodes[i].output[0]: nodes[i].input[0] for i in quantized
                  if nodes[i].op_type in SAME_SCALE and nodes[i].output[0] in wanted}
    return Plan(quantized, pairs, same_scale)


def roles(node: onnx.NodeProto, consts: dict[str, TensorProto]) -> dict[int, tuple[str, str]]:
    """Input position -> (name, role) for the inputs a quantized node quantizes: "activation" (a pair),
    "const" (an int8 constant), "weight" (int8 per channel) or "bias" (int32)."""
    positions = ACTIVATIONS.get(node.op_type, ())
    result = {}
    for p, name in enumerate(node.input):
        if name and (positions is None or p in positions):
            result[p] = (name, "const" if name in consts else "activation")
    if node.op_type in LAYERS and len(node.input) > 1 and node.input[1] in consts:
        result[1] = (node.input[1], "weight")
        if len(node.input) > 2 and node.input[2] in consts and _has_bias(node, consts):
            result[2] = (node.input[2], "bias")
    return result


def _has_bias(node: onnx.NodeProto, consts: dict[str, TensorProto]) -> bool:
    if node.op_type == "Conv":
        return True
    if node.op_type != "Gemm" or any(a.name in ("alpha", "beta") and a.f != 1 for a in node.attribute):
        return False
    c, w = consts[node.input[2]].dims, consts[node.input[1]].dims
    n = w[0] if _attr(node, "transB") else w[1]
    return int(np.prod(c)) in (1, n) and tuple(c[-1:]) in ((), (1,), (n,))


def _attr(node: onnx.NodeProto, name: str) -> int:
    return next((a.i for a in node.attribute if a.name == name), 0)


def activation_params(lo: float, hi: float) -> tuple[np.float32, np.int8]:
    """Scale and zero point of int8 asymmetric quantization of [lo, hi] (0 included)."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = np.float32(max((hi - lo) / 255, MIN_SCALE))
    return scale, np.int8(np.clip(np.round(-128 - lo / np.float64(scale)), -128, 127))


def weight_scale(w: np.ndarray, axis: int | None, bias: np.ndarray | None, x_scale: np.float32) -> np.ndarray:
    """Symmetric int8 scale of w, per channel along `axis` (or per tensor), at least MIN_SCALE and large
    enough that the bias fits in int32 at scale x_scale * w_scale."""
    if axis is None:
        amax, bmax = np.abs(w).max(initial=0.0), 0.0 if bias is None else np.abs(bias).max(initial=0.0)
    else:
        amax = np.abs(np.moveaxis(w, axis, 0)).reshape(w.shape[axis], -1).max(axis=1, initial=0.0)
        bmax = 0.0 if bias is None else np.abs(bias)
    scale = np.maximum(np.maximum(amax / 127, MIN_SCALE), bmax / (np.float64(x_scale) * INT32_MAX) * (1 + 1e-6))
    return np.asarray(scale, np.float32)


@dataclass(frozen=True)
class _Params:
    scale: np.ndarray
    zero: np.ndarray
    names: tuple[str, str]        # the initializers holding them


def write_qdq(model: onnx.ModelProto, plan: Plan, ranges: dict[str, tuple[float, float]],
              per_channel: bool = True) -> onnx.ModelProto:
    """The QDQ model of a prepared model from its plan and the calibrated ranges of plan.calibrated."""
    return _Writer(model, plan, ranges, per_channel).model()


class _Writer:
    def __init__(self, model: onnx.ModelProto, plan: Plan, ranges: dict[str, tuple[float, float]],
                 per_channel: bool):
        self.source, self.plan, self.ranges, self.per_channel = model, plan, ranges, per_channel
        self.consts = {t.name: t for t in model.graph.initializer}
        self.names = set(self.consts) | {v.name for v in model.graph.input} | \
            {n for node in model.graph.node for n in (*node.input, *node.output)}
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[TensorProto] = []
        self.params: dict[str, _Params] = {}
        self.done: dict[tuple, str] = {}  # quantized constants already written -> their DequantizeLinear output

    def model(self) -> onnx.ModelProto:
        g = self.source.graph
        pairs = set(self.plan.pairs)
        renamed = {}
        for v in g.input:
            if v.name in pairs:
                renamed[v.name] = self.pair(v.name, v.name, self.fresh(f"{v.name}_dq"), self.activation(v.name))
        for i, original in enumerate(g.node):
            node = onnx.NodeProto()
            node.CopyFrom(original)
            node.input[:] = [renamed.get(n, n) for n in node.input]
            if i in self.plan.quantized:
                self.quantize_inputs(node, original)
            paired = [(k, out) for k, out in enumerate(original.output) if out in pairs]
            for k, out in paired:
                node.output[k] = self.fresh(f"{out}_f32")
            self.nodes.append(node)
            for k, out in paired:
                source = self.plan.same_scale.get(out)
                self.params[out] = self.params[source] if source else self.activation(out)
                self.pair(out, node.output[k], out, self.params[out])
        result = onnx.ModelProto()
        result.CopyFrom(self.source)
        used = {n for node in self.nodes for n in node.input} | subgraph_reads(self.nodes) | \
            {v.name for v in (*g.input, *g.output)}
        del result.graph.node[:], result.graph.initializer[:]
        result.graph.node.extend(self.nodes)
        result.graph.initializer.extend([t for t in g.initializer if t.name in used] + self.inits)
        return typed(result)

    def fresh(self, base: str) -> str:
        return fresh_name(base, self.names)

    def init(self, base: str, value: np.ndarray) -> str:
        name = self.fresh(base)
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def activation(self, name: str) -> _Params:
        """The scale and zero point of an activation from its calibrated range."""
        scale, zero = activation_params(*self.ranges[name])
        names = (self.init(f"{name}_scale", scale), self.init(f"{name}_zero_point", zero))
        self.params[name] = _Params(scale, zero, names)
        return self.params[name]

    def pair(self, tensor: str, src: str, dst: str, p: _Params) -> str:
        """QuantizeLinear(src) and DequantizeLinear to dst: tensor's pair."""
        q = self.fresh(f"{tensor}_q")
        self.nodes.append(helper.make_node("QuantizeLinear", [src, *p.names], [q], name=q))
        self.nodes.append(helper.make_node("DequantizeLinear", [q, *p.names], [dst], name=f"{q}_dq"))
        return dst

    def dequantized(self, base: str, q: np.ndarray, scale: np.ndarray, zero: np.ndarray | None,
                    axis: int | None) -> onnx.NodeProto:
        """A DequantizeLinear of the constant q (zero point left out for int32), added to the graph."""
        names = [self.init(f"{base}_quantized", q), self.init(f"{base}_scale", scale)]
        names += [self.init(f"{base}_zero_point", zero)] if zero is not None else []
        out = self.fresh(f"{base}_dq")
        self.nodes.append(helper.make_node("DequantizeLinear", names, [out], name=out,
                                           **({} if axis is None else {"axis": axis})))
        return self.nodes[-1]

    def quantize_inputs(self, node: onnx.NodeProto, original: onnx.NodeProto) -> None:
        """Point the node's constant inputs at DequantizeLinear of their int8 or int32 form (activations
        already read their pair's output)."""
        rs = roles(original, self.consts)
        for p, (name, role) in rs.items():
            if role == "const":
                node.input[p] = self.constant(name)
        if 1 in rs and rs[1][1] == "weight":
            w = numpy_helper.to_array(self.consts[rs[1][0]])
            axis = self.weight_axis(original, w)
            bias = numpy_helper.to_array(self.consts[rs[2][0]]).astype(np.float64) if 2 in rs else None
            x_scale = self.params[original.input[0]].scale
            if bias is not None:
                n = w.shape[axis] if axis is not None else None
                bias = np.broadcast_to(bias.reshape(-1), (n or bias.size,))
            scale = weight_scale(w.astype(np.float64), axis, bias, x_scale)
            key = ("weight", rs[1][0], axis, scale.tobytes())
            if key not in self.done:
                shape = [-1 if d == axis else 1 for d in range(w.ndim)] if axis is not None else []
                q = np.clip(np.round(w / scale.reshape(shape)), -127, 127).astype(np.int8)
                self.done[key] = self.dequantized(rs[1][0], q, scale, np.zeros(scale.shape, np.int8), axis).output[0]
            node.input[1] = self.done[key]
            if bias is not None:
                b_scale = (x_scale * scale).astype(np.float32)
                q = np.clip(np.round(bias / b_scale), -INT32_MAX, INT32_MAX).astype(np.int32)
                node.input[2] = self.dequantized(rs[2][0], q, b_scale, None, 0 if b_scale.ndim else None).output[0]

    def weight_axis(self, node: onnx.NodeProto, w: np.ndarray) -> int | None:
        if not self.per_channel or w.ndim < 2:
            return None
        if node.op_type == "Conv":
            return 0
        return (0 if _attr(node, "transB") else 1) if node.op_type == "Gemm" else w.ndim - 1

    def constant(self, name: str) -> str:
        """A float constant read as an activation: int8 per tensor from its own range."""
        if name not in self.params:
            x = numpy_helper.to_array(self.consts[name]).astype(np.float64)
            scale, zero = activation_params(float(x.min(initial=0.0)), float(x.max(initial=0.0)))
            q = np.clip(np.round(x / scale) + zero, -128, 127).astype(np.int8)
            dq = self.dequantized(name, q, scale, zero, None)
            self.params[name] = _Params(scale, zero, (dq.input[1], dq.input[2]))
            self.done[("const", name)] = dq.output[0]
        return self.done[("const", name)]
