"""The float types other than float32 (float16, bfloat16, the float8 types, float64) are stored as such (their
bits in C, uint16_t or uint8_t; float64 as double) and computed in float32, cglow's one float arithmetic (a
double in a Cortex-M4 loop is a library call per operation): before import, every node that reads or writes one,
other than a cast, reads it through a Cast to float32 and writes float32 that a Cast rounds back to its type. Each
op's result is rounded, as a float16 kernel that computes in float32 rounds it (onnxruntime's); rounding only at
the graph's outputs passed fewer of the node suite's cases (1355 against 1357 of 1802). A float64 model is told
so (a Notice). The casts convert bits and floats in C (runtime_c/half_to_float.c, float_to_half.c...)."""
from __future__ import annotations

import warnings

import onnx
from onnx import TensorProto, helper, shape_inference

from ..errors import Notice

STORED_TYPES = (TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E4M3FNUZ,
                TensorProto.FLOAT8E5M2, TensorProto.FLOAT8E5M2FNUZ, TensorProto.DOUBLE)
# the ops that take a stored float tensor as it is: casts, and the ops whose attributes give their output type
KEPT = {"Cast", "CastLike", "Constant", "ConstantOfShape", "EyeLike"}


def compute_in_float(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with its stored float values read through Casts to float32 and written through Casts from it
    around every node but the casts and the ops whose attributes give their output type (KEPT)."""
    if not _mentions_stored_floats(model.graph):
        return model  # no shape inference for a model without them
    types = _elem_types(model)
    if TensorProto.DOUBLE in types.values():
        warnings.warn(Notice("float64 values are computed in float32 (cglow's float arithmetic), stored as "
                             "float64 where the model's inputs, outputs and casts have them"), stacklevel=3)
    nodes, as_float = [], {}

    def read(name: str) -> str:
        if types.get(name) not in STORED_TYPES:
            return name
        if name not in as_float:
            as_float[name] = f"{name}__as_float"
            nodes.append(helper.make_node("Cast", [name], [as_float[name]], f"{name} as float", to=TensorProto.FLOAT))
        return as_float[name]
    for node in model.graph.node:
        if node.op_type in KEPT or node.domain not in ("", "ai.onnx") or \
                any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
            nodes.append(node)
            continue
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        copy.input[:] = [read(name) for name in node.input]
        halves = [name for name in node.output if types.get(name) in STORED_TYPES]
        copy.output[:] = [f"{name}__float" if name in halves else name for name in node.output]
        nodes.append(copy)
        nodes += [helper.make_node("Cast", [f"{name}__float"], [name], f"{name} rounded", to=types[name])
                  for name in halves]
    converted = onnx.ModelProto()
    converted.CopyFrom(model)
    del converted.graph.node[:]
    converted.graph.node.extend(nodes)
    return converted


def _mentions_stored_floats(g: onnx.GraphProto) -> bool:
    """Whether a graph's declared types, initializers, or nodes' type attributes and tensors name a stored float
    type: where any of its values can come from."""
    declared = [v.type.tensor_type.elem_type for v in list(g.input) + list(g.output) + list(g.value_info)]
    declared += [t.data_type for t in g.initializer]
    for node in g.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.INT and a.name in ("to", "dtype", "output_dtype", "output_datatype"):
                declared.append(a.i)
            elif a.type == onnx.AttributeProto.TENSOR:
                declared.append(a.t.data_type)
            elif a.type == onnx.AttributeProto.GRAPH and _mentions_stored_floats(a.g):
                return True
    return any(t in STORED_TYPES for t in declared)


def _elem_types(model: onnx.ModelProto) -> dict[str, int]:
    """Every value's element type, as declared and as ONNX's shape inference finds it."""
    try:
        g = shape_inference.infer_shapes(model).graph
    except Exception:  # noqa: BLE001  (no inferred types: the declared ones)
        g = model.graph
    types = {v.name: v.type.tensor_type.elem_type for v in list(g.input) + list(g.value_info) + list(g.output)
             if v.type.HasField("tensor_type")}
    types.update({t.name: t.data_type for t in g.initializer})
    for node in g.node:
        if node.op_type == "Constant":
            for a in node.attribute:
                if a.name == "value":
                    types[node.output[0]] = a.t.data_type
    return types
