"""The float model made ready for quantization, on a copy: the opset raised to 13 at least (QuantizeLinear
and DequantizeLinear per axis), Identity and Dropout dropped, a MatMul plus the Add of a constant bias made
one Gemm (so that the bias becomes an int32 bias), BatchNormalization folded into the Conv or Gemm with
constant weights before it, and ONNX shape inference run so that every tensor has a type.

A BatchNormalization that cannot be folded (its input read by another node too, weights computed at run
time, a negative variance) stays: it is then computed in float between a DequantizeLinear and a
QuantizeLinear. The folded constants are computed in float64 and stored as float32. A node whose op type or
name is to be kept in float is not rewritten: a BatchNormalization stays, a MatMul is not made a Gemm."""
from __future__ import annotations

import copy

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..errors import CglowError, reason
from ..graph.fold_batchnorm import affine, scaled
from ..names import fresh_name

QDQ_OPSET = 13


def prepare(model: onnx.ModelProto, keep_float: frozenset[str] = frozenset()) -> onnx.ModelProto:
    model = typed(_at_least_opset(model, QDQ_OPSET))
    graph = _Graph(model, keep_float)
    graph.drop_passthrough()
    graph.rewrite(_matmul_add_as_gemm)
    graph.rewrite(_fold_batchnorm)
    graph.store(model)
    return typed(model)


def typed(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with ONNX shape inference run and every node's output typed (its value_info is replaced)."""
    del model.graph.value_info[:]
    try:
        model = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    except Exception as exc:  # onnx raises several types (InferenceError, ValidationError...)
        raise CglowError(f"ONNX shape inference fails on the model ({reason(exc)})") from None
    known = {v.name for v in (*model.graph.input, *model.graph.value_info, *model.graph.output)}
    known |= {t.name for t in model.graph.initializer}
    for node in model.graph.node:
        for out in node.output:
            if out and out not in known:
                raise CglowError(f"ONNX shape inference gives no type to {out!r}, output of {node.op_type} node "
                                 f"{node.name!r}: quantization needs every tensor's type")
    return model


def tensor_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    """Every typed tensor of a typed() model: inputs, inferred intermediates, outputs and initializers."""
    types = {v.name: v.type for v in (*model.graph.input, *model.graph.value_info, *model.graph.output)}
    for t in model.graph.initializer:
        types[t.name] = helper.make_tensor_type_proto(t.data_type, list(t.dims))
    return types


def subgraph_reads(nodes) -> set[str]:
    """The names that the subgraphs of these nodes (If, Loop and Scan bodies) read: names of the outer scope
    among them."""
    names: set[str] = set()
    for node in nodes:
        for a in node.attribute:
            for g in [a.g] if a.type == onnx.AttributeProto.GRAPH else a.graphs:
                names |= {n for inner in g.node for n in inner.input} | subgraph_reads(g.node)
    return names


def _at_least_opset(model: onnx.ModelProto, opset: int) -> onnx.ModelProto:
    versions = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if not versions:
        raise CglowError("the model imports no version of the default ONNX domain")
    if versions[0] >= opset:
        return copy.deepcopy(model)
    try:
        return onnx.version_converter.convert_version(model, opset)
    except Exception as exc:
        raise CglowError(f"cannot convert the model from opset {versions[0]} to {opset}, which QuantizeLinear "
                         f"per axis needs ({reason(exc)})") from None


class _Graph:
    """The nodes and constants of a model's graph while it is rewritten."""

    def __init__(self, model: onnx.ModelProto, keep_float: frozenset[str]):
        g = model.graph
        self.keep_float = keep_float
        self.nodes = list(g.node)
        self.consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
        self.inputs = {v.name for v in g.input}
        self.outputs = {v.name for v in g.output}
        self.pinned = self.outputs | subgraph_reads(self.nodes)   # names that must stay and stay read
        self.types = tensor_types(model)
        self.names = set(self.consts) | self.inputs | {o for n in self.nodes for o in n.output}

    def kept(self, *nodes: onnx.NodeProto) -> bool:
        return any({n.op_type, n.name} & self.keep_float for n in nodes)

    def readers(self, name: str) -> list[onnx.NodeProto]:
        return [n for n in self.nodes if name in n.input]

    def producer(self, name: str) -> onnx.NodeProto | None:
        return next((n for n in self.nodes if name in n.output), None)

    def read_only_by(self, name: str, node: onnx.NodeProto) -> bool:
        readers = self.readers(name)
        return name not in self.pinned and len(readers) == 1 and readers[0] is node

    def const(self, name: str) -> np.ndarray | None:
        value = self.consts.get(name)
        return value if value is not None and value.dtype == np.float32 else None

    def rank(self, name: str) -> int | None:
        t = self.types.get(name)
        return len(t.tensor_type.shape.dim) if t is not None and t.tensor_type.HasField("shape") else None

    def add_const(self, base: str, value: np.ndarray) -> str:
        name = fresh_name(base, self.names)
        self.consts[name] = value.astype(np.float32)
        return name

    def rename(self, old: str, new: str) -> None:
        for node in self.nodes:
            node.input[:] = [new if n == old else n for n in node.input]
            node.output[:] = [new if n == old else n for n in node.output]

    def drop_passthrough(self) -> None:
        """Identity, and Dropout in inference (no training_mode input, no mask read), read through."""
        for node in list(self.nodes):
            mask = node.output[1] if len(node.output) > 1 else ""
            if not (node.op_type == "Identity" or node.op_type == "Dropout" and len(node.input) < 3 and
                    not (mask and (mask in self.pinned or self.readers(mask)))):
                continue
            src, dst = node.input[0], node.output[0]
            if dst not in self.pinned:
                self.nodes.remove(node)
                self.rename(dst, src)
            elif dst in self.outputs and src not in self.pinned | self.inputs and self.producer(src) is not None:
                self.nodes.remove(node)
                self.rename(src, dst)

    def rewrite(self, fold) -> None:
        """fold(self, node) returns the nodes that the node replaced (and it is changed into), or []."""
        for node in list(self.nodes):
            if node in self.nodes:
                for gone in fold(self, node):
                    self.nodes.remove(gone)

    def store(self, model: onnx.ModelProto) -> None:
        g = model.graph
        used = {n for node in self.nodes for n in node.input} | self.pinned | self.inputs
        kept = [t for t in g.initializer if t.name in used and t.name in self.consts]
        old = {t.name for t in kept}
        new = [numpy_helper.from_array(v, name) for name, v in self.consts.items() if name in used and name not in old]
        del g.node[:], g.initializer[:]
        g.node.extend(self.nodes)
        g.initializer.extend(kept + new)


def _attr(node: onnx.NodeProto, name: str, default):
    return next((helper.get_attribute_value(a) for a in node.attribute if a.name == name), default)


def _drop_attrs(node: onnx.NodeProto, *names: str) -> None:
    kept = [a for a in node.attribute if a.name not in names]
    del node.attribute[:]
    node.attribute.extend(kept)


def _matmul_add_as_gemm(g: _Graph, add: onnx.NodeProto) -> list[onnx.NodeProto]:
    """Add(MatMul(A, W), c) with A of rank 2, W a constant [K, N] and c a constant [N] or [1, N]: Gemm(A, W, c)."""
    if add.op_type != "Add":
        return []
    for value, bias in ((add.input[0], add.input[1]), (add.input[1], add.input[0])):
        matmul, c = g.producer(value), g.const(bias)
        if matmul is None or matmul.op_type != "MatMul" or c is None or not g.read_only_by(value, add) or \
                g.kept(matmul, add):
            continue
        w = g.const(matmul.input[1])
        if w is None or w.ndim != 2 or g.rank(matmul.input[0]) != 2 or c.shape not in ((w.shape[1],), (1, w.shape[1])):
            continue
        gemm = helper.make_node("Gemm", [matmul.input[0], matmul.input[1], g.add_const(bias, c.reshape(-1))],
                                list(add.output), name=matmul.name or add.name)
        g.nodes[g.nodes.index(add)] = gemm
        return [matmul]
    return []


def _fold_batchnorm(g: _Graph, bn: onnx.NodeProto) -> list[onnx.NodeProto]:
    """BatchNormalization into the Conv, ConvTranspose or Gemm computing x (graph/fold_batchnorm.py's fold)."""
    if bn.op_type != "BatchNormalization" or any(bn.output[1:]) or _attr(bn, "training_mode", 0) or g.kept(bn):
        return []
    params = [g.const(n) for n in bn.input[1:5]]
    layer = g.producer(bn.input[0])
    if any(p is None for p in params) or layer is None or not g.read_only_by(bn.input[0], bn) or \
            layer.op_type not in ("Conv", "ConvTranspose", "Gemm"):
        return []
    found = affine(*params, _attr(bn, "epsilon", 1e-5))
    w = g.const(layer.input[1]) if len(layer.input) > 1 else None
    bias_name = layer.input[2] if len(layer.input) > 2 else ""
    bias = g.const(bias_name)
    if found is None or w is None or bias_name and bias is None:
        return []
    attrs = {a.name: helper.get_attribute_value(a) for a in layer.attribute}
    folded = scaled(layer.op_type, attrs, w, 0.0 if bias is None else bias, *found, g.rank(layer.input[0]))
    if folded is None:
        return []
    _drop_attrs(layer, "alpha", "beta")
    layer.input[1:] = [g.add_const(f"{layer.input[1]}_bn", folded[0]),
                       g.add_const(f"{bias_name or bn.input[2]}_bn", folded[1])]
    layer.output[0] = bn.output[0]
    return [bn]