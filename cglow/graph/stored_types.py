"""Element types that cglow stores but does not compute in: the float types other than float32 (float16, bfloat16,
the float8 types, E8M0 too, float4 E2M1, float64), computed in float32, cglow's one float arithmetic (a double in a
Cortex-M4 loop is a library call per operation); and the 4- and 2-bit integers, computed in int8 or uint8. Each is
stored as such: their bits in C (uint16_t or uint8_t; a float4's or a 4- or 2-bit integer's in its byte's low bits,
as NumPy's ml_dtypes keeps them); float64 as double. Before import, every node that reads or writes one (inside
If, Loop and Scan bodies too; a run-time If selects such values in their computing type, graph/control_flow.py), other
than a cast, a bit cast or an op that only moves values (KEPT), reads it through a Cast to its computing type and
writes that type, which a Cast rounds (or wraps) back; a QuantizeLinear to float8 or float4 and a DequantizeLinear
from them convert their quantized values and zero points in their own map; a ReLU, Clip, Max or Min reads
the value before its rounding where it is its one reader (EXACT: the same result). The kernels then keep float16 and
bfloat16 values so in the arena, converting them as they load them (instr/stored_floats.py). Each op's result is
rounded,
as a float16 kernel that computes in float32 rounds it (onnxruntime's); rounding only at the graph's outputs passed
fewer of the node suite's cases (1355 against 1357 of 1802). A QuantizeLinear to a 4- or 2-bit type saturates in
8 bits and is clipped to its range. A float64 model is told so (a Notice). The casts convert in C
(runtime_c/half_to_float.c, float_to_half.c...; lower/ops/logic.py)."""
from __future__ import annotations

import warnings

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference

from ..errors import Notice
from .inferred import value_types

T = TensorProto
COMPUTED_AS = {  # stored type -> the type it computes in
    **dict.fromkeys((T.FLOAT16, T.BFLOAT16, T.FLOAT8E4M3FN, T.FLOAT8E4M3FNUZ, T.FLOAT8E5M2, T.FLOAT8E5M2FNUZ,
                     T.FLOAT8E8M0, T.FLOAT4E2M1, T.DOUBLE), T.FLOAT),
    T.INT4: T.INT8, T.INT2: T.INT8, T.UINT4: T.UINT8, T.UINT2: T.UINT8,
}
RANGES = {T.INT4: (-8, 7), T.INT2: (-2, 1), T.UINT4: (0, 15), T.UINT2: (0, 3)}
# the ops that take a stored tensor as it is: casts, bit casts, the ops whose attributes give their output type, and
# those that move values without computing (views and copies: a float16 Concat's inputs and result stay float16)
KEPT = {"Cast", "CastLike", "BitCast", "Constant", "ConstantOfShape", "EyeLike",
        "Concat", "DepthToSpace", "Expand", "Flatten", "Identity", "Reshape", "Slice", "SpaceToDepth", "Split",
        "Squeeze", "Tile", "Transpose", "Unsqueeze"}
# the float types that QuantizeLinear writes and DequantizeLinear reads as they are: their map converts them
QUANTIZED_FLOATS = {T.FLOAT8E4M3FN, T.FLOAT8E4M3FNUZ, T.FLOAT8E5M2, T.FLOAT8E5M2FNUZ, T.FLOAT4E2M1}


def compute_stored(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with its stored values read through Casts to their computing types and written through Casts from
    them around every node but the casts and the ops whose attributes give their output type (KEPT); the nodes of
    If, Loop and Scan bodies too, each body reading through Casts of its own."""
    if not _mentions_stored_types(model.graph):
        return model  # no shape inference for a model without them
    types = {name: t.tensor_type.elem_type for name, t in value_types(model).items() if t.HasField("tensor_type")}
    types = {**_bodies_types(model), **types}
    if T.DOUBLE in types.values():
        warnings.warn(Notice("float64 values are computed in float32 (cglow's float arithmetic), stored as "
                             "float64 where the model's inputs, outputs and casts have them"), stacklevel=3)
    converted = onnx.ModelProto()
    converted.CopyFrom(model)
    del converted.graph.node[:]
    converted.graph.node.extend(_computed(model.graph, types, ""))
    return converted


def _computed(graph: onnx.GraphProto, types: dict[str, int], scope: str) -> list[onnx.NodeProto]:
    """A graph's nodes rewritten as compute_stored says; `scope` tells a body's reading Casts apart from those of
    the graphs around it (a body may read a value they read too)."""
    types = {**types, **_declared(graph)}
    nodes, as_computed = [], {}

    def read(name: str) -> str:
        if types.get(name) not in COMPUTED_AS:
            return name
        if name not in as_computed:
            as_computed[name] = f"{name}__read{scope}"
            nodes.append(helper.make_node("Cast", [name], [as_computed[name]], f"{name} read{scope}",
                                          to=COMPUTED_AS[types[name]]))
        return as_computed[name]
    for i, node in enumerate(graph.node):
        bodies = [a for a in node.attribute if a.type == onnx.AttributeProto.GRAPH]
        if bodies:  # control flow takes and gives stored values as they are; its bodies compute them
            copy = onnx.NodeProto()
            copy.CopyFrom(node)
            for a in copy.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    rewritten = _computed(a.g, types, f"{scope}.{i}.{a.name}")
                    del a.g.node[:]
                    a.g.node.extend(rewritten)
            nodes.append(copy)
            continue
        if node.op_type in KEPT or node.domain not in ("", "ai.onnx"):
            nodes.append(node)
            continue
        as_stored = _quantized_floats(node, types)
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        copy.input[:] = [name if name in as_stored else read(name) for name in node.input]
        stored = [name for name in node.output if types.get(name) in COMPUTED_AS and name not in as_stored]
        copy.output[:] = [f"{name}__computed" if name in stored else name for name in node.output]
        nodes.append(copy)
        for name in stored:
            value = f"{name}__computed"
            if node.op_type == "QuantizeLinear" and types[name] in RANGES:
                dtype = np.int8 if COMPUTED_AS[types[name]] == T.INT8 else np.uint8
                lo, hi = (numpy_helper.from_array(np.array(v, dtype), f"{name}__{what}")
                          for v, what in zip(RANGES[types[name]], ("lowest", "highest")))
                nodes += [helper.make_node("Constant", [], [lo.name], value=lo),
                          helper.make_node("Constant", [], [hi.name], value=hi),
                          helper.make_node("Clip", [value, lo.name, hi.name], [f"{name}__clipped"])]
                value = f"{name}__clipped"
            nodes.append(helper.make_node("Cast", [value], [name], f"{name} rounded", to=types[name]))
    return _unrounded_reads(nodes, {v.name for v in graph.output})


# the elementwise ops whose result on values of a float type is a value of that type, rounded or not: a rounding of
# their input, which is monotonic, does not change the rounding of their result (round(max(round(x), c)) =
# round(max(x, c)) where round(c) = c; the limits of a Clip and the other operands of a Max or Min are of the type).
# Reading the value before its rounding lets the kernel that computes it apply them in its epilogue and round once;
# a MaxPool would instead keep that value in float32 (googlenet's first one: 64 KiB more of arena)
EXACT = {"Relu", "Clip", "Max", "Min"}


def _unrounded_reads(nodes: list[onnx.NodeProto], outputs: set[str]) -> list[onnx.NodeProto]:
    """The nodes with each op of EXACT that is the one reader of a rounded value reading the value before its
    rounding (its own result is rounded): a stored value less, and a Conv's ReLU fused into its epilogue as in a
    float32 model."""
    readers: dict[str, int] = {}
    for node in nodes:
        for name in set(node.input) | _names_in_bodies(node):
            readers[name] = readers.get(name, 0) + 1
    made = {out: node for node in nodes for out in node.output}
    for node in nodes:
        if node.op_type not in EXACT or node.domain not in ("", "ai.onnx") or not node.input:
            continue
        read = made.get(node.input[0])
        stored = read is not None and read.op_type == "Cast" and read.name.endswith(" read") and read.input[0]
        rounding = made.get(stored) if stored else None
        if rounding is None or rounding.op_type != "Cast" or rounding.name != f"{stored} rounded" or \
                stored in outputs or readers.get(stored) != 1 or readers.get(node.input[0]) != 1:
            continue
        node.input[0] = rounding.input[0]
    return nodes


def _names_in_bodies(node: onnx.NodeProto) -> set[str]:
    """Every name that a node's If, Loop or Scan bodies mention (a body reads values of the graphs around it)."""
    names: set[str] = set()
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            for inner in a.g.node:
                names |= set(inner.input) | _names_in_bodies(inner)
    return names


def _bodies_types(model: onnx.ModelProto) -> dict[str, int]:
    """The element types of the values inside the model's bodies, as ONNX's inference finds them (none where it
    fails: the bodies' declared ones then)."""
    try:
        graph = shape_inference.infer_shapes(model).graph
    except Exception:  # noqa: BLE001
        return {}

    def inside(g: onnx.GraphProto) -> dict[str, int]:
        found: dict[str, int] = {}
        for node in g.node:
            for a in node.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    found.update({**_declared(a.g), **inside(a.g)})
        return found
    return inside(graph)


def _declared(graph: onnx.GraphProto) -> dict[str, int]:
    """The element types a body declares or ONNX's inference wrote into it (inputs, outputs, value_info,
    initializers)."""
    found = {v.name: v.type.tensor_type.elem_type for v in list(graph.input) + list(graph.value_info) +
             list(graph.output) if v.type.HasField("tensor_type") and v.type.tensor_type.elem_type}
    found.update({t.name: t.data_type for t in graph.initializer})
    return found


def _quantized_floats(node: onnx.NodeProto, types: dict[str, int]) -> set[str]:
    """A QuantizeLinear's float8 or float4 output and zero point, or a DequantizeLinear's input and zero point: the
    values it takes as stored (its map converts them, lower/ops/quant.py)."""
    if node.op_type not in ("QuantizeLinear", "DequantizeLinear"):
        return set()
    quantized = (node.input if node.op_type == "DequantizeLinear" else node.output)[0]
    if types.get(quantized) not in QUANTIZED_FLOATS:
        return set()
    return {quantized} | set(node.input[2:3])


def _mentions_stored_types(g: onnx.GraphProto) -> bool:
    """Whether a graph's declared types, initializers, or nodes' type attributes and tensors name a stored type:
    where any of its values can come from."""
    declared = [v.type.tensor_type.elem_type for v in list(g.input) + list(g.output) + list(g.value_info)]
    declared += [t.data_type for t in g.initializer]
    for node in g.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.INT and a.name in ("to", "dtype", "output_dtype", "output_datatype"):
                declared.append(a.i)
            elif a.type == onnx.AttributeProto.TENSOR:
                declared.append(a.t.data_type)
            elif a.type == onnx.AttributeProto.GRAPH and _mentions_stored_types(a.g):
                return True
    return any(t in COMPUTED_AS for t in declared)
