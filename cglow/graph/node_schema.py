"""A node against its ONNX operator schema at the model's opset: how many inputs and outputs it may have,
its attributes (known to the op, of the declared type, the required ones present) and its inputs' element
types. A malformed node stops at import, named, before a shape rule or a lowering reads it."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import defs, helper

ATTRIBUTE_TYPES = onnx.AttributeProto.AttributeType
FLAGS = {"keepdims", "select_last_index", "transA", "transB", "ceil_mode", "count_include_pad", "exclusive",
         "reverse", "largest", "sorted", "upper", "allowzero", "noop_with_empty_axes", "linear_before_reset",
         "input_forget", "layout", "storage_order", "exclude_outside", "center_point_box", "detect_negative",
         "detect_positive", "fmod", "new_axis", "training_mode", "antialias", "saturate", "periodic",
         "onesided"}  # the int attributes that are flags: 0 or 1


def _schema(proto: onnx.NodeProto, opset: int):
    """The op's schema, or None for an op ONNX does not define at this opset (the importer reports it as
    unsupported unless cglow knows it)."""
    try:
        return defs.get_schema(proto.op_type, opset, "")
    except defs.SchemaError:
        return None


def schema_problem(proto: onnx.NodeProto, described: str, opset: int) -> str | None:
    """What is wrong with the node's arity (a required input left empty too) and attributes, or None."""
    schema = _schema(proto, opset)
    if schema is None:
        return None
    for kind, count, least, most in (("inputs", len(proto.input), schema.min_input, schema.max_input),
                                     ("outputs", len(proto.output), schema.min_output, schema.max_output)):
        if not least <= count <= most:
            return f"{described}: {count} {kind}, where {proto.op_type}-{schema.since_version} takes " \
                   f"{least}{f' to {most}' if most != least else ''}"
    for i, name in enumerate(proto.input):
        formal = schema.inputs[min(i, len(schema.inputs) - 1)]
        if not name and formal.option != formal.option.Optional:
            return f"{described}: input {i} ({formal.name}) is required but empty"
    given = {a.name: a for a in proto.attribute}
    unknown = sorted(set(given) - set(schema.attributes))
    if unknown:
        return f"{described}: {proto.op_type}-{schema.since_version} has no attribute '{unknown[0]}'"
    for name, spec in sorted(schema.attributes.items()):
        attr = given.get(name)
        if attr is None:
            if spec.required:
                return f"{described}: the required attribute '{name}' is missing"
        elif attr.ref_attr_name:
            return f"{described}: attribute '{name}' refers to a function's attribute; cglow reads models, " \
                   f"not function bodies"
        elif attr.type != int(spec.type):
            return f"{described}: attribute '{name}' is {_type_name(attr.type)}, where " \
                   f"{proto.op_type} takes {_type_name(int(spec.type))}"
        elif name in FLAGS and attr.type == onnx.AttributeProto.INT and attr.i not in (0, 1):
            return f"{described}: attribute '{name}' is {attr.i}; it is a flag, 0 or 1"
    return None


def input_type_problem(proto: onnx.NodeProto, described: str, opset: int,
                       dtypes: list[np.dtype | None]) -> str | None:
    """What is wrong with the element types of the node's inputs (None: unknown) for its schema's type
    constraints: each one allowed, and the inputs that share a type variable of one type."""
    schema = _schema(proto, opset)
    if schema is None or not schema.inputs:
        return None
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    bound: dict[str, tuple[str, str]] = {}
    for i, (name, dtype) in enumerate(zip(proto.input, dtypes)):
        formal = schema.inputs[min(i, len(schema.inputs) - 1)]
        if not name or dtype is None:
            continue
        given = _type_string(dtype)
        if given not in allowed.get(formal.type_str, {formal.type_str}):
            return f"{described}: input '{name}' is {given}, which {proto.op_type}-{schema.since_version} " \
                   f"does not take there"
        if formal.type_str in allowed and (formal.option != formal.option.Variadic or formal.is_homogeneous):
            first, other = bound.setdefault(formal.type_str, (given, name))
            if first != given:
                return f"{described}: inputs '{other}' ({first}) and '{name}' ({given}) must have one type"
    return None


def _type_string(dtype: np.dtype) -> str:
    return f"tensor({onnx.TensorProto.DataType.Name(helper.np_dtype_to_tensor_dtype(dtype)).lower()})"


def _type_name(value: int) -> str:
    return ATTRIBUTE_TYPES.Name(value) if value in ATTRIBUTE_TYPES.values() else f"type {value}"
