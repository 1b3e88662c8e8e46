"""ONNX import: a ModelProto becomes a typed Graph with static shapes and constants folded."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper, version_converter  # noqa: F401  (onnx.version_converter)
from onnx.reference import ReferenceEvaluator

from ..errors import CglowError
from . import rules  # noqa: F401  (registers every shape rule)
from .ir import Graph, Node, TensorType
from .registry import RUNTIME_DTYPES, SHAPE_RULES, Args

OPSETS = range(11, 29)  # later opsets mostly add element types; each rule checks where semantics changed
RANDOM_OPS = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}


def load(model: str | Path | onnx.ModelProto) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return model
    path = Path(model)
    if not path.is_file():
        raise CglowError(f"{path}: no such file")
    try:
        return onnx.load(str(path))
    except Exception as exc:  # protobuf raises several unrelated types for a bad file
        raise CglowError(f"{path}: not a readable ONNX model ({type(exc).__name__})") from None


def _opset(model: onnx.ModelProto) -> int:
    versions = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if not versions:
        raise CglowError("the model imports no version of the default ONNX domain")
    return versions[0]


def upgrade(model: onnx.ModelProto) -> onnx.ModelProto:
    """A model older than the supported opsets, converted to the oldest supported one."""
    opset = _opset(model)
    if opset in OPSETS:
        return model
    if opset < OPSETS.start:
        try:
            return onnx.version_converter.convert_version(model, OPSETS.start)
        except Exception as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise CglowError(f"opset {opset} is older than cglow supports ({OPSETS.start} to {OPSETS.stop - 1}) "
                             f"and onnx.version_converter could not convert it: {reason}") from None
    raise CglowError(f"opset {opset} is not supported (cglow supports opsets {OPSETS.start} to "
                     f"{OPSETS.stop - 1})")


def _dtype(elem_type: int, what: str) -> np.dtype:
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except Exception:
        raise CglowError(f"{what}: unsupported element type {elem_type}") from None


def _input_type(value: onnx.ValueInfoProto, shapes: dict[str, tuple[int, ...]]) -> TensorType:
    tt = value.type.tensor_type
    if not value.type.HasField("tensor_type") or not tt.HasField("shape") and value.name not in shapes:
        raise CglowError(f"input '{value.name}' has no tensor shape; pass --shape {value.name}=1,3,224,224")
    dtype = _dtype(tt.elem_type, f"input '{value.name}'")
    if value.name in shapes:
        shape = shapes[value.name]
        if tt.HasField("shape") and len(tt.shape.dim) != len(shape):
            raise CglowError(f"--shape {value.name}: rank {len(shape)} differs from the model's "
                             f"{len(tt.shape.dim)}")
        return TensorType(dtype, tuple(shape))
    dims = []
    for i, d in enumerate(tt.shape.dim):
        if not d.HasField("dim_value") or d.dim_value <= 0:
            label = f"'{d.dim_param}'" if d.dim_param else "unknown"
            raise CglowError(f"input '{value.name}' has a symbolic dimension {label} at axis {i}; pass "
                             f"--shape {value.name}=" + ",".join(str(x.dim_value or 1) for x in tt.shape.dim))
        dims.append(d.dim_value)
    return TensorType(dtype, tuple(dims))


def _attrs(proto: onnx.NodeProto) -> dict:
    out = {}
    for a in proto.attribute:
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        elif isinstance(v, onnx.TensorProto):
            v = numpy_helper.to_array(v)
        elif isinstance(v, list):
            v = tuple(x.decode("utf-8", "replace") if isinstance(x, bytes) else x for x in v)
        out[a.name] = v
    return out


def _fold(proto: onnx.NodeProto, node: Node, consts: dict, types: dict, opset: int) -> list[np.ndarray]:
    if node.op == "Shape" and node.inputs[0] in types:
        shape = np.array(types[node.inputs[0]].shape, dtype=np.int64)
        start, end = node.attr("start", 0), node.attr("end", len(shape))
        return [shape[start:end] if opset >= 15 else shape]
    if node.op == "Size" and node.inputs[0] in types:
        return [np.array(types[node.inputs[0]].size, dtype=np.int64)]
    if node.op == "CastLike" and node.inputs[0] in consts:
        return [consts[node.inputs[0]].astype(types[node.inputs[1]].dtype)]
    feeds = {name: consts[name] for name in node.inputs if name}
    try:
        results = ReferenceEvaluator(proto, opsets={"": opset}).run(None, feeds)
    except Exception as exc:
        raise CglowError(f"{node.describe()}: constant folding failed ({type(exc).__name__}: {exc})") from None
    return [np.asarray(r) for r in results]


def _foldable(node: Node, consts: dict, types: dict) -> bool:
    if node.op in ("Shape", "Size"):  # they need only the input's type
        return node.inputs[0] in types
    if node.op == "CastLike":
        return node.inputs[0] in consts and node.inputs[1] in types
    return node.op not in RANDOM_OPS and all(not name or name in consts for name in node.inputs)


def import_model(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]] | None = None,
                 source: str = "") -> Graph:
    shapes = dict(shapes or {})
    model = upgrade(model)
    g = model.graph
    opset = _opset(model)
    consts: dict[str, np.ndarray] = {}
    for init in g.initializer:
        try:
            consts[init.name] = numpy_helper.to_array(init)
        except Exception as exc:
            raise CglowError(f"initializer '{init.name}': unreadable tensor ({exc})") from None
    inputs = [v for v in g.input if v.name not in consts]
    unknown = set(shapes) - {v.name for v in inputs}
    if unknown:
        raise CglowError(f"--shape names no graph input: {', '.join(sorted(unknown))} "
                         f"(inputs: {', '.join(v.name for v in inputs)})")
    problems: list[str] = []  # every problem is reported, in one message
    types: dict[str, TensorType] = {}
    for v in inputs:
        try:
            types[v.name] = _input_type(v, shapes)
        except CglowError as exc:
            problems.append(str(exc))
    types.update({k: TensorType(v.dtype, v.shape) for k, v in consts.items()})

    known = {o for p in g.node for o in p.output} | {v.name for v in inputs}
    nodes, unsupported = [], {}
    for i, proto in enumerate(g.node):
        node = Node(proto.op_type, proto.name or f"{proto.op_type}_{i}", tuple(proto.input),
                    tuple(proto.output), _attrs(proto))
        missing = [n for n in node.inputs if n and n not in types and n not in consts]
        if proto.domain not in ("", "ai.onnx"):
            unsupported.setdefault(f"{proto.domain}.{node.op}", []).append(node.name)
            continue
        dangling = [m for m in missing if m not in known]
        if dangling:
            problems.append(f"{node.describe()}: input '{dangling[0]}' is produced by no node, initializer or "
                            f"graph input")
            continue
        if missing:  # produced by a node that failed, or a later node (not topologically sorted / cycle)
            if node.op not in SHAPE_RULES and not _foldable(node, consts, types):
                unsupported.setdefault(node.op, []).append(node.name)
            continue
        try:
            if _foldable(node, consts, types):
                for name, value in zip(node.outputs, _fold(proto, node, consts, types, opset)):
                    consts[name] = value
                    types[name] = TensorType(value.dtype, value.shape)
                continue
            rule = SHAPE_RULES.get(node.op)
            if rule is None:
                unsupported.setdefault(node.op, []).append(node.name)
                continue
            args = Args(node, tuple(types.get(n) for n in node.inputs),
                        tuple(consts.get(n) for n in node.inputs), opset)
            try:
                out_types = rule(args)
            except (IndexError, KeyError, TypeError, ValueError, AttributeError) as exc:
                raise CglowError(f"{node.describe()}: malformed node ({type(exc).__name__}: {exc})") from None
        except CglowError as exc:
            problems.append(str(exc))
            continue
        for name, t in zip(node.outputs, out_types):
            if name:
                types[name] = t
        nodes.append(node)

    if unsupported:
        listing = "; ".join(f"{op} ({', '.join(repr(n) for n in names)})" for op, names in sorted(unsupported.items()))
        problems.insert(0, f"unsupported operators: {listing}")
    bad_types: dict[str, list[str]] = {}
    for name in [v.name for v in inputs] + [o for n in nodes for o in n.outputs]:
        if name in types and types[name].dtype not in RUNTIME_DTYPES:
            bad_types.setdefault(types[name].dtype.name, []).append(name)
    if bad_types:
        problems.append("unsupported element types at run time (cglow runs float32, bool and 8- to 64-bit "
                        "integers): " + "; ".join(f"{t} ({', '.join(repr(n) for n in names)})"
                                                  for t, names in sorted(bad_types.items())))
    if problems:
        raise CglowError("; ".join(problems))
    outputs = tuple(o.name for o in g.output)
    for name in outputs:
        if name not in types:
            raise CglowError(f"graph output '{name}' is produced by no node (cycle or unsorted graph?)")
    return Graph(name=g.name or "model", opset=opset, inputs=tuple(v.name for v in inputs), outputs=outputs,
                 types=types, consts=consts, nodes=tuple(nodes), source=source)
