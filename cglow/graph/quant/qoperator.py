"""The QOperator form of quantized ONNX (QLinearConv, QLinearMatMul, and Microsoft's QLinearAdd, QGemm...)
rewritten, before import, into the QDQ form: DequantizeLinear on the inputs, the float op, QuantizeLinear on
the output. One form reaches the graph passes: graph/quant/fold.py turns each such pair into an integer op,
and what it does not recognize runs in float between the two, as the QDQ form says."""
from __future__ import annotations

from functools import lru_cache
import math
from typing import Callable

import onnx
from onnx import helper

from ...errors import CglowError
from ...names import fresh_name
from ..inferred import value_shapes
from ..topology import describe

MICROSOFT = "com.microsoft"


class _Rewrite:
    """The nodes replacing one QOperator node, with fresh value names. `shapes`: the model's value shapes where
    its opset is below 13, whose DequantizeLinear takes no axis (else None)."""

    def __init__(self, proto: onnx.NodeProto, taken: set[str], described: str, shapes: Callable[[], dict] | None):
        self.proto, self.taken, self.described, self.shapes = proto, taken, described, shapes
        self.nodes: list[onnx.NodeProto] = []

    def arg(self, i: int) -> str:
        return self.proto.input[i] if i < len(self.proto.input) else ""

    def fresh(self, what: str) -> str:
        return fresh_name(f"{self.proto.output[0]}_{what}", self.taken)

    def node(self, op: str, inputs, output: str | None = None, **attrs) -> str:
        output = output or self.fresh(op.lower())
        self.nodes.append(helper.make_node(op, list(inputs), [output], name=f"{self.proto.name}/{op}", **attrs))
        return output

    def dequantize(self, x: int, scale: int, zero: int, axis: int | None = None) -> str:
        inputs = [self.arg(x), self.arg(scale)] + ([self.arg(zero)] if self.arg(zero) else [])
        return self.node("DequantizeLinear", inputs, **self.axis(axis, scale))

    def axis(self, axis: int | None, scale: int) -> dict:
        """A per-axis DequantizeLinear's attributes, its scale input `scale`'s: none below opset 13, where it
        takes a single scale only."""
        if axis is None:
            return {}
        if self.shapes is None:
            return {"axis": axis}
        shape = self.shapes().get(self.arg(scale))
        if shape is None or math.prod(shape) != 1:
            raise CglowError(f"{self.described}: per-channel scales ('{self.arg(scale)}') need DequantizeLinear's "
                             f"axis, which it takes from opset 13; convert the model to opset 13 or later")
        return {}

    def quantize(self, value: str, scale: int, zero: int) -> None:
        inputs = [value, self.arg(scale)] + ([self.arg(zero)] if self.arg(zero) else [])
        self.node("QuantizeLinear", inputs, self.proto.output[0])

    def attrs(self, drop=()) -> dict:
        return {a.name: helper.get_attribute_value(a) for a in self.proto.attribute if a.name not in drop}


def _conv(r: _Rewrite) -> None:
    x, w = r.dequantize(0, 1, 2), r.dequantize(3, 4, 5, axis=0)
    inputs = [x, w]
    if r.arg(8):  # int32 bias at scale x_scale * w_scale
        scale = r.node("Mul", [r.arg(1), r.arg(4)])
        inputs.append(r.node("DequantizeLinear", [r.arg(8), scale], **r.axis(0, 4)))
    r.quantize(r.node("Conv", inputs, **r.attrs()), 6, 7)


def _matmul(r: _Rewrite) -> None:
    r.quantize(r.node("MatMul", [r.dequantize(0, 1, 2), r.dequantize(3, 4, 5, axis=-1)]), 6, 7)


def _gemm(r: _Rewrite) -> None:
    """Microsoft's QGemm: an int32 C has the scale alpha * a_scale * b_scale; without y_scale the output
    is float."""
    attrs = r.attrs()
    inputs = [r.dequantize(0, 1, 2), r.dequantize(3, 4, 5, axis=0 if attrs.get("transB", 0) else 1)]
    if r.arg(6):
        scale = r.node("Mul", [r.arg(1), r.arg(4)])
        if attrs.get("alpha", 1.0) != 1.0:
            alpha = r.node("Constant", [], value=helper.make_tensor("alpha", onnx.TensorProto.FLOAT, [],
                                                                      [attrs["alpha"]]))
            scale = r.node("Mul", [scale, alpha])
        inputs.append(r.node("DequantizeLinear", [r.arg(6), scale], **r.axis(0, 4)))
    if r.arg(7):
        r.quantize(r.node("Gemm", inputs, **attrs), 7, 8)
    else:
        r.node("Gemm", inputs, r.proto.output[0], **attrs)


def _binary(op: str):
    def rewrite(r: _Rewrite) -> None:
        r.quantize(r.node(op, [r.dequantize(0, 1, 2), r.dequantize(3, 4, 5)]), 6, 7)
    return rewrite


def _unary(op: str, drop=()):
    def rewrite(r: _Rewrite) -> None:
        attrs = r.attrs(drop)
        if r.attrs().get("channels_last", 0):
            raise CglowError(f"{r.described}: channels_last=1 is not supported")
        r.quantize(r.node(op, [r.dequantize(0, 1, 2)], **attrs), 3, 4)
    return rewrite


def _softmax(r: _Rewrite) -> None:
    """QLinearSoftmax names the opset of the Softmax it replaces: before 13, Softmax normalized over all
    dims from `axis` on, which only the last axis alone makes the same."""
    attrs = r.attrs(("opset",))
    if r.attrs().get("opset", 13) < 13 and attrs.get("axis", 1) not in (-1,):
        raise CglowError(f"{r.described}: Softmax of opset < 13 over axis {attrs.get('axis', 1)} is not supported; "
                         f"use axis=-1")
    r.quantize(r.node("Softmax", [r.dequantize(0, 1, 2)], **attrs), 3, 4)


def _concat(r: _Rewrite) -> None:
    count = len(r.proto.input) - 2
    if count < 3 or count % 3:
        raise CglowError(f"{r.described}: {len(r.proto.input)} inputs; QLinearConcat takes Y_scale, Y_zero_point "
                         f"and triples of X, X_scale, X_zero_point")
    parts = [r.dequantize(i, i + 1, i + 2) for i in range(2, len(r.proto.input), 3)]
    r.quantize(r.node("Concat", parts, **r.attrs()), 0, 1)


# op: (domain, least inputs, most inputs, rewrite)
REWRITES = {
    "QLinearConv": ("", 8, 9, _conv),
    "QLinearMatMul": ("", 8, 8, _matmul),
    "QGemm": (MICROSOFT, 6, 9, _gemm),
    "QLinearAdd": (MICROSOFT, 7, 8, _binary("Add")),
    "QLinearMul": (MICROSOFT, 7, 8, _binary("Mul")),
    "QLinearAveragePool": (MICROSOFT, 4, 5, _unary("AveragePool", ("channels_last",))),
    "QLinearGlobalAveragePool": (MICROSOFT, 4, 5, _unary("GlobalAveragePool", ("channels_last",))),
    "QLinearLeakyRelu": (MICROSOFT, 4, 5, _unary("LeakyRelu")),
    "QLinearSigmoid": (MICROSOFT, 4, 5, _unary("Sigmoid")),
    "QLinearSoftmax": (MICROSOFT, 4, 5, _softmax),
    "QLinearConcat": (MICROSOFT, 5, 1 << 16, _concat),
}
QOPERATORS = tuple(sorted(REWRITES))  # supported, by rewriting (the README's op list names them)


def _rewritten(proto: onnx.NodeProto, i: int, taken: set[str], shapes) -> list[onnx.NodeProto] | None:
    spec = REWRITES.get(proto.op_type)
    if spec is None or proto.domain not in ((spec[0],) if spec[0] else ("", "ai.onnx")):
        return None
    domain, least, most, rewrite = spec
    described = describe(proto, i)
    if not least <= len(proto.input) <= most or len(proto.output) != 1 or not proto.output[0]:
        raise CglowError(f"{described}: {len(proto.input)} inputs and {len(proto.output)} outputs, where "
                         f"{proto.op_type} takes {least} to {most} inputs and one output")
    r = _Rewrite(proto, taken, described, shapes)
    rewrite(r)
    return r.nodes


def expand_qoperators(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with every QOperator node in QDQ form (the same model when it has none)."""
    g = model.graph
    if not any(p.op_type in REWRITES for p in g.node):
        return model
    taken = {n for p in g.node for n in list(p.input) + list(p.output)} | {t.name for t in g.initializer} | \
        {v.name for v in g.input}
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)
    shapes = None if opset >= 13 else lru_cache(maxsize=None)(lambda: value_shapes(model))
    nodes = []
    for i, proto in enumerate(g.node):
        nodes.extend(_rewritten(proto, i, taken, shapes) or [proto])
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    return out
