"""Every value's type in an ONNX model as ONNX's shape inference finds it, for the rewrites that run before import
(graph/functions.py, decompose.py, stored_types.py): the declared ones where inference fails."""
from __future__ import annotations

import onnx
from onnx import helper, shape_inference


def value_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    """Every value's type: graph inputs and outputs, inferred values, initializers and Constant nodes' values.
    Inferred with data propagation (a Reshape's target shape made by Shape, Slice and Concat), or without where
    that fails."""
    g = model.graph  # where inference fails: only the declared types
    for data_prop in (True, False):
        try:
            g = shape_inference.infer_shapes(model, data_prop=data_prop).graph
            break
        except Exception:  # noqa: BLE001
            continue
    types = {v.name: v.type for v in list(g.input) + list(g.value_info) + list(g.output)}
    for t in g.initializer:
        types[t.name] = helper.make_tensor_type_proto(t.data_type, list(t.dims))
    for node in g.node:
        for a in node.attribute:
            if node.op_type == "Constant" and a.name == "value":
                types.setdefault(node.output[0], helper.make_tensor_type_proto(a.t.data_type, list(a.t.dims)))
    return types


def value_shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    """The static shape of every value whose shape value_types knows."""
    shapes = {}
    for name, t in value_types(model).items():
        dims = t.tensor_type.shape.dim if t.HasField("tensor_type") and t.tensor_type.HasField("shape") else None
        if dims is not None and all(d.HasField("dim_value") for d in dims):
            shapes[name] = tuple(d.dim_value for d in dims)
    return shapes
