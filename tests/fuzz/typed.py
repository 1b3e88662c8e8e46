"""The random float32 graphs (graphs.py) in the float types that cglow stores but computes in float32 (float16,
bfloat16, float64: graph/stored_types.py): the same graph with its inputs, outputs, weights and the attributes that
carry the float type (Cast's `to`, ConstantOfShape's value) in the type, and a reference for it. The reference is
onnxruntime on the typed graph where it has the kernels; where it refuses (it has few bfloat16 kernels, no float16
ones for many ops), onnxruntime on the computation that cglow documents: the graph in float32 between Casts, each
typed input and weight read through a Cast to float32 and each op's typed result rounded through a Cast to the type
and back (`rounded_in_float32`)."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T, helper, numpy_helper

from ..util import ort_run
from .builder import OPSET, Rejected
from .graphs import random_graph

TYPES = {"float16": T.FLOAT16, "bfloat16": T.BFLOAT16, "float64": T.DOUBLE}
# of each output's scale, as differential.TOLERANCE (which float64 takes: cglow computes it in float32, onnxruntime's
# float64 kernels in float64, 1.3e-5 the most in 80 graphs). float16: onnxruntime's kernels (the reference of 118 in
# 120 graphs) compute in float32 and round the result, or in float16, or skip roundings (its Cast insertion around the
# ops it has no float16 kernel for runs a chain of them in float32), so that the two differ by a few roundings, each
# u = 2^-11 of its value, carried to the output (at most 9 u in 180 graphs, most under 3 u): 32 u. bfloat16: the
# reference computes as cglow does (rounded_in_float32: 119 of 120 graphs), the same bits unless a float32 result
# lies across a rounding boundary (one step, 2 u = 2^-7, where u = 2^-8, carried on: none in 180 graphs): 4 u. A
# wrong value (a pixel, an index, a coefficient) is off by about the output's scale; a bfloat16 GridSample that
# rounded each step of its coordinates read the next pixel, 7.5 u off
TOLERANCES = {"float16": 2.0 ** -6, "bfloat16": 2.0 ** -6}
# the ops whose output type their attributes give: they write the type as they are
TYPE_GIVING = {"Cast", "Constant", "ConstantOfShape"}


def typed_graph(model: onnx.ModelProto, elem: int) -> onnx.ModelProto:
    """The float32 graph in type `elem`: its float inputs, outputs and weights (those that an op's type variable
    takes: not Resize's scales, always float32), Casts to float and ConstantOfShape's float values. Rejected when
    ONNX does not allow an op in that type (strict shape inference checks each op's type constraints)."""
    typed = onnx.ModelProto()
    typed.CopyFrom(model)
    graph, dtype = typed.graph, helper.tensor_dtype_to_np_dtype(elem)
    for v in list(graph.input) + list(graph.output):
        if v.type.tensor_type.elem_type == T.FLOAT:
            v.type.tensor_type.elem_type = elem
    fixed = {name for node in graph.node for i, name in enumerate(node.input) if _fixed_float(node, i)}
    for i, init in enumerate(graph.initializer):
        if init.data_type == T.FLOAT and init.name not in fixed:
            graph.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(dtype),
                                                                  init.name))
    for node in graph.node:
        for a in node.attribute:
            if node.op_type == "Cast" and a.name == "to" and a.i == T.FLOAT:
                a.i = elem
            elif a.type == onnx.AttributeProto.TENSOR and a.t.data_type == T.FLOAT:
                a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(dtype), a.t.name))
    try:
        onnx.shape_inference.infer_shapes(typed, check_type=True, strict_mode=True, data_prop=True)
    except Exception as exc:  # onnx raises its own exception types
        raise Rejected(f"not a valid graph in {helper.tensor_dtype_to_string(elem)}: {exc}") from exc
    return typed


def _fixed_float(node: onnx.NodeProto, i: int) -> bool:
    """Whether input i of the node is float32 whatever the type of its data (Resize's scales)."""
    formal = onnx.defs.get_schema(node.op_type, OPSET, node.domain).inputs
    return formal[min(i, len(formal) - 1)].type_str == "tensor(float)"


def typed_feeds(model: onnx.ModelProto, feeds: dict[str, np.ndarray], seed: int, index: int,
                attempt: int) -> dict[str, np.ndarray]:
    """The typed graph's feeds: the float ones normal values drawn anew in float64 and rounded to the type (float64
    ones then have bits that float32 has not: cglow's reading Cast rounds them), the index ones as they are."""
    rng = np.random.default_rng([seed, index, attempt, 1])
    elems = {v.name: v.type.tensor_type.elem_type for v in model.graph.input}
    return {name: x if x.dtype.kind != "f" else
            rng.standard_normal(x.shape).astype(helper.tensor_dtype_to_np_dtype(elems[name]))
            for name, x in feeds.items()}


def typed_case(type_name: str):
    """A graph maker for differential.reference_case: random_graph's graph `index` of `seed` in the type (an attempt
    that does not convert is drawn again, as the reference's refusals are)."""
    elem = TYPES[type_name]

    def graphs(seed: int, index: int, attempt: int = 0) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
        model, feeds = random_graph(seed, index, attempt)
        typed = typed_graph(model, elem)
        return typed, typed_feeds(typed, feeds, seed, index, attempt)
    return graphs


def rounded_in_float32(model: onnx.ModelProto) -> onnx.ModelProto:
    """The typed graph computed as cglow documents it: every op other than the type-giving ones (TYPE_GIVING) reads
    its typed inputs through a Cast to float32, computes in float32 and writes its typed outputs through a Cast to
    their type, which rounds them. The graph's inputs, outputs and weights keep their type."""
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True).graph
    types = {v.name: v.type.tensor_type.elem_type for v in list(inferred.input) + list(inferred.value_info) +
             list(inferred.output)}
    types.update({t.name: t.data_type for t in inferred.initializer})
    typed = set(TYPES.values())
    nodes, read = [], {}

    def as_float(name: str) -> str:
        if types.get(name) not in typed:
            return name
        if name not in read:
            read[name] = f"{name}__float"
            nodes.append(helper.make_node("Cast", [name], [read[name]], to=T.FLOAT))
        return read[name]
    for node in model.graph.node:
        if node.op_type in TYPE_GIVING:
            nodes.append(node)
            continue
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        copy.input[:] = [as_float(name) for name in node.input]
        copy.output[:] = [f"{name}__computed" if types.get(name) in typed else name for name in node.output]
        nodes.append(copy)
        nodes += [helper.make_node("Cast", [f"{name}__computed"], [name], to=types[name])
                  for name in node.output if types.get(name) in typed]
    rounded = onnx.ModelProto()
    rounded.CopyFrom(model)
    del rounded.graph.node[:]
    rounded.graph.node.extend(nodes)
    return rounded


class IllConditioned(Exception):
    """The typed graph's result depends on where its roundings fall, beyond the type's tolerance."""


def typed_reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray], agree) -> list[np.ndarray]:
    """onnxruntime's outputs of the typed graph: of the graph as it is where onnxruntime has its kernels, else of the
    graph rounded_in_float32 (which raises where onnxruntime refuses the graph in float32 too: reference_case then
    draws another). Where it has them, the graph rounded_in_float32 must `agree` with them (agree(outputs, theirs):
    whether the outputs are theirs within the type's tolerance), else it raises IllConditioned, for reference_case to
    draw another: a graph whose result turns on its roundings tests nothing (1 in 150 float16 graphs: an attention
    block's logits in the thousands, one past float16's range where onnxruntime fuses the scaling into the product,
    and the softmax an argmax of them)."""
    try:
        want = _ort_typed(model, feeds)
    except Exception:  # onnxruntime raises its own exception types
        return _ort_typed(rounded_in_float32(model), feeds)
    if not agree(_ort_typed(rounded_in_float32(model), feeds), want):
        raise IllConditioned("onnxruntime's typed kernels and its float32 ones with each result rounded disagree")
    return want


def _ort_typed(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """ort_run, its bfloat16 inputs and outputs (which onnxruntime's Python API neither takes nor gives) exchanged
    as float32 through Casts in the graph: the same values."""
    through = onnx.ModelProto()
    through.CopyFrom(model)
    graph, casts, feeds = through.graph, [], dict(feeds)
    for v in graph.input:
        if v.type.tensor_type.elem_type == T.BFLOAT16:
            casts.append(helper.make_node("Cast", [f"{v.name}__as_float32"], [v.name], to=T.BFLOAT16))
            feeds[f"{v.name}__as_float32"] = feeds.pop(v.name).astype(np.float32)
            v.name, v.type.tensor_type.elem_type = f"{v.name}__as_float32", T.FLOAT
    wanted = []
    for v in graph.output:
        wanted.append(helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type))
        if v.type.tensor_type.elem_type == T.BFLOAT16:
            graph.node.append(helper.make_node("Cast", [v.name], [f"{v.name}__as_float32"], to=T.FLOAT))
            v.name, v.type.tensor_type.elem_type = f"{v.name}__as_float32", T.FLOAT
    nodes = casts + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)
    return [x.astype(dtype) for x, dtype in zip(ort_run(through, feeds), wanted)]
