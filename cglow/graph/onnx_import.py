"""ONNX import: a ModelProto becomes a typed Graph with static shapes and constants folded. Anything
malformed raises one CglowError that names what and where; the checks live beside: the text fields
(proto_text.py), external data files (external_data.py), the node order (topology.py), each node against its
schema (node_schema.py) and every tensor's size against --max-memory (limits.py)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
import warnings

import numpy as np
import onnx
from onnx import helper, version_converter  # noqa: F401  (onnx.version_converter)

from ..errors import CglowError, ModelProblems, Notice, listed, reason
from ..options import MAX_MEMORY
from .evaluate_node import evaluate_node, outer_names
from .external_data import load_external_data
from .decompose import decompose
from .functions import expand_functions
from .c_loop import c_loop
from .control_flow import CONTROL_FLOW
from .subgraphs import Budget, Step
from .unroll import scans_per_batch
from .stored_types import compute_stored
from .limits import checked_type, read_tensor
from .node_schema import input_type_problem, schema_problem
from .proto_text import check_text
from .quant.qoperator import expand_qoperators
from .topology import describe, node_label, topological_order
from .ir import Graph, Node, TensorType
from .registry import OPS, RUNTIME_DTYPES, Args, shape_rule
from .rules.tensor import pad_widths

OPSETS = range(11, 29)  # later opsets mostly add element types; each rule checks where semantics changed
RANDOM_OPS = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}


def load(model: str | Path | onnx.ModelProto, max_memory: int = MAX_MEMORY) -> onnx.ModelProto:
    """The model, its text fields checked, and for a file its external data read from files beside it (checked:
    external_data.py)."""
    if isinstance(model, onnx.ModelProto):
        check_text(model)
        return model
    path = Path(model)
    if not path.is_file():
        raise CglowError(f"{path}: no such file")
    try:
        proto = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf raises several unrelated types for a bad file
        raise CglowError(f"{path}: not a readable ONNX model ({type(exc).__name__})") from None
    check_text(proto)
    load_external_data(proto, path.parent, max_memory)
    return proto


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
    if opset < OPSETS.start:  # the converter does not check the nodes at the model's own opset: check them first
        problems = [problem for i, proto in enumerate(model.graph.node) if proto.domain in ("", "ai.onnx") and
                    (problem := schema_problem(proto, describe(proto, i), opset))]
        if problems:
            raise ModelProblems(problems)
        model, split = scans_per_batch(model) if opset < 9 else (model, set())
        try:
            converted = onnx.version_converter.convert_version(model, OPSETS.start)
        except Exception as exc:
            raise CglowError(f"opset {opset} is older than cglow supports ({OPSETS.start} to {OPSETS.stop - 1}) "
                             f"and onnx.version_converter could not convert it ({reason(exc)})") from None
        kept = [v for v in converted.graph.value_info if v.name not in split]
        del converted.graph.value_info[:]
        converted.graph.value_info.extend(kept)
        return converted
    raise CglowError(f"opset {opset} is not supported (cglow supports opsets {OPSETS.start} to "
                     f"{OPSETS.stop - 1})")


def _dtype(elem_type: int, what: str) -> np.dtype:
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except Exception:
        raise CglowError(f"{what}: unsupported element type {elem_type}") from None


def _input_type(value: onnx.ValueInfoProto, shapes: dict[str, tuple[int, ...]]) -> tuple[TensorType, str]:
    """The input's type, and the name of its symbolic first dimension when that was taken as 1 (else "")."""
    kind = value.type.WhichOneof("value")
    if kind not in ("tensor_type", None):
        raise CglowError(f"input '{value.name}' is a {kind.replace('_type', '')} value; cglow compiles tensors only")
    tt = value.type.tensor_type
    if not tt.HasField("shape") and value.name not in shapes:
        raise CglowError(f"input '{value.name}' has no tensor shape; pass --shape {value.name}=1,3,224,224")
    dtype = _dtype(tt.elem_type, f"input '{value.name}'")
    if value.name in shapes:
        shape = shapes[value.name]
        if tt.HasField("shape") and len(tt.shape.dim) != len(shape):
            raise CglowError(f"--shape {value.name}: rank {len(shape)} differs from the model's "
                             f"{len(tt.shape.dim)}; give {len(tt.shape.dim)} dimensions")
        return TensorType(dtype, tuple(shape)), ""
    dims, batch = [], ""
    for i, d in enumerate(tt.shape.dim):
        label = f"'{d.dim_param}'" if d.dim_param else "unknown"
        if not d.HasField("dim_value") and i == 0 and len(tt.shape.dim) > 1:  # a batch: one inference at a time
            dims.append(1)
            batch = label
            continue
        if not d.HasField("dim_value"):
            raise CglowError(f"input '{value.name}' has a symbolic dimension {label} at axis {i}; pass "
                             f"--shape {value.name}=" + ",".join(str(max(x.dim_value, 1)) for x in tt.shape.dim))
        if d.dim_value < 0:
            raise CglowError(f"input '{value.name}' has a negative dimension {d.dim_value} at axis {i}")
        dims.append(d.dim_value)
    return TensorType(dtype, tuple(dims)), batch


def _batch_notice(batches: dict[str, str], types: dict[str, TensorType]) -> None:
    """A notice for the inputs whose symbolic first dimension was taken as 1: not a failure, but the C then
    runs one sample at a time, which the user should know."""
    if batches:
        named = ", ".join(f"'{name}' ({label})" for name, label in batches.items())
        first = next(iter(batches))
        warnings.warn(Notice(f"the symbolic first dimension of {named} is taken as 1; --shape {first}="
                             f"{','.join(map(str, types[first].shape))} sets it"), stacklevel=2)


def _attrs(proto: onnx.NodeProto, described: str, max_memory: int) -> dict:
    out = {}
    for a in proto.attribute:
        try:
            v = helper.get_attribute_value(a)
        except ValueError:
            raise CglowError(f"{described}: attribute '{a.name}' is unreadable (type {a.type})") from None
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        elif isinstance(v, onnx.TensorProto):
            v = read_tensor(v, f"{described}: attribute '{a.name}'", max_memory)
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
    feeds = {name: consts[name] for name in node.inputs + tuple(_outer_reads(node)) if name}
    try:
        if node.op == "Pad":
            return [_pad(node, consts, types, opset)]
        if node.op == "LRN":
            return [_lrn(node, consts[node.inputs[0]])]
        if node.op == "GatherElements":  # the reference evaluator's takes at most 64 along the axis (np.choose)
            data, index = consts[node.inputs[0]], consts[node.inputs[1]]
            axis = node.attr("axis", 0) % data.ndim
            data = data[tuple(slice(None) if d == axis else slice(0, n) for d, n in enumerate(index.shape))]
            return [np.take_along_axis(data, np.where(index < 0, index + data.shape[axis], index), axis)]
        return evaluate_node(proto, feeds, opset)
    except Exception as exc:
        raise CglowError(f"{node.describe()}: constant folding failed ({reason(exc)})") from None


def _lrn(node: Node, x: np.ndarray) -> np.ndarray:
    """A constant LRN (the reference evaluator reads channels past the last where there are fewer than `size`):
    x / (bias + alpha / size * the sum of the squares of the channels from c - (size - 1) // 2 to
    c + ceil((size - 1) / 2), those there are)^beta."""
    size, channels = node.attr("size"), x.shape[1]
    squares = x.astype(np.float64) ** 2
    below, above = (size - 1) // 2, size // 2
    total = np.stack([squares[:, max(0, c - below):c + above + 1].sum(axis=1) for c in range(channels)], axis=1)
    scale = node.attr("bias", 1.0) + node.attr("alpha", 1e-4) / size * total
    return (x / scale ** node.attr("beta", 0.75)).astype(x.dtype)


def _pad(node: Node, consts: dict, types: dict, opset: int) -> np.ndarray:
    """A constant Pad (the reference evaluator refuses negative pads, which crop)."""
    args = Args(node, tuple(types.get(n) for n in node.inputs), tuple(consts.get(n) for n in node.inputs), opset)
    widths = pad_widths(args)
    data = consts[node.inputs[0]]
    data = data[tuple(slice(-min(b, 0), d + min(e, 0)) for (b, e), d in zip(widths, data.shape))]
    grow = [(max(b, 0), max(e, 0)) for b, e in widths]
    mode = node.attr("mode", "constant")
    if mode == "constant":
        value = consts[node.inputs[2]] if len(node.inputs) > 2 and node.inputs[2] else np.zeros(1, data.dtype)
        return np.pad(data, grow, constant_values=value.reshape(-1)[0])
    return np.pad(data, grow, mode=mode)


def _foldable(node: Node, consts: dict, types: dict) -> bool:
    if node.op in ("Shape", "Size"):  # they need only the input's type
        return node.inputs[0] in types
    if node.op == "CastLike":
        return node.inputs[0] in consts and node.inputs[1] in types
    if node.op == "DequantizeLinear":  # integer weights stay integers: graph/quant/fold.py reads them
        return False
    return node.op not in RANDOM_OPS and all(not name or name in consts for name in node.inputs + _outer_reads(node))


def _outer_reads(node: Node) -> tuple[str, ...]:
    """The values that the node's subgraphs (an If's branches) read from the graph around them."""
    return tuple(sorted(outer_names(v for v in node.attrs.values() if isinstance(v, onnx.GraphProto))))


def _constants(g: onnx.GraphProto, max_memory: int) -> dict[str, np.ndarray]:
    if g.sparse_initializer:
        names = ", ".join(repr(t.values.name) for t in g.sparse_initializer)
        raise CglowError(f"sparse initializers are not supported: {names}")
    consts: dict[str, np.ndarray] = {}
    for init in g.initializer:
        if init.name in consts:
            raise CglowError(f"initializer '{init.name}' is defined twice")
        consts[init.name] = read_tensor(init, f"initializer '{init.name}'", max_memory)
    return consts


def _rule_types(node: Node, rule, consts: dict, types: dict, opset: int) -> list[TensorType]:
    args = Args(node, tuple(types.get(n) for n in node.inputs), tuple(consts.get(n) for n in node.inputs), opset)
    try:
        return rule(args)
    except (ArithmeticError, AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
        raise CglowError(f"{node.describe()}: malformed node ({reason(exc)})") from None


def _folded(proto: onnx.NodeProto, node: Node, consts: dict, types: dict, opset: int,
            max_memory: int) -> list[np.ndarray]:
    """The outputs of a node with constant inputs, computed now. When a shape rule can tell the outputs'
    sizes first, they are checked before anything is computed (a ConstantOfShape or an Expand of a few bytes
    can ask for terabytes)."""
    rule = shape_rule(node.op)
    if rule is not None:
        try:
            expected = _rule_types(node, rule, consts, types, opset)
        except CglowError:  # the reference evaluator may still know how to compute it
            expected = []
        for name, t in zip(node.outputs, expected):
            checked_type(f"{node.describe()}: output '{name}'", t, max_memory)
    values = _fold(proto, node, consts, types, opset)
    for name, value in zip(node.outputs, values):
        checked_type(f"{node.describe()}: output '{name}'", TensorType(value.dtype, value.shape), max_memory)
    return values


def _evaluate(proto: onnx.NodeProto, node: Node, consts: dict, types: dict, opset: int,
              max_memory: int) -> list[TensorType] | None:
    """The node's output types, its outputs computed into `consts` when its inputs are constants; None for
    an op cglow has no shape rule for. The schema's type constraints come after cglow's own checks, whose
    messages say what cglow supports."""
    type_problem = input_type_problem(proto, node.describe(), opset,
                                      [types[n].dtype if n else None for n in node.inputs])
    rule = shape_rule(node.op)
    if _foldable(node, consts, types):
        if type_problem:
            raise CglowError(type_problem)
        try:
            values = _folded(proto, node, consts, types, opset, max_memory)
        except CglowError:
            if rule is None:  # where cglow lowers the op (a grouped ConvTranspose that the reference evaluator
                raise         # fails on), it is computed at run time instead
        else:
            consts.update(zip(node.outputs, values))
            return [TensorType(v.dtype, v.shape) for v in values]
    if rule is None:
        return None
    out_types = [checked_type(f"{node.describe()}: output '{name}'", t, max_memory)
                 for name, t in zip(node.outputs, _rule_types(node, rule, consts, types, opset))]
    if type_problem:
        raise CglowError(type_problem)
    return out_types


def _check_outputs(g: onnx.GraphProto, types: dict[str, TensorType]) -> None:
    """Every graph output is computed, with the element type and static dims the model declares for it (along a
    dim of run-time length, TensorType.counted, at most its capacity)."""
    if not g.output:
        raise CglowError("the graph has no outputs")
    for value in g.output:
        t = types.get(value.name)
        if t is None:
            raise CglowError(f"graph output '{value.name}' is produced by no node, initializer or graph input")
        declared = value.type.tensor_type
        dtype = _dtype(declared.elem_type, f"graph output '{value.name}'") if declared.elem_type else t.dtype
        if dtype != t.dtype:
            raise CglowError(f"graph output '{value.name}': the model declares it {dtype.name}, the graph "
                             f"computes {t.dtype.name}")
        dims = declared.shape.dim
        if declared.HasField("shape") and (len(dims) != len(t.shape) or any(
                d.HasField("dim_value") and (d.dim_value > n if k == t.counted else d.dim_value != n)
                for k, (d, n) in enumerate(zip(dims, t.shape)))):
            shape = ",".join(str(d.dim_value) if d.HasField("dim_value") else d.dim_param or "?" for d in dims)
            raise CglowError(f"graph output '{value.name}': the model declares the shape [{shape}], the graph "
                             f"computes {t}")


def import_model(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]] | None = None,
                 source: str = "", max_memory: int = MAX_MEMORY) -> Graph:
    """The model as a typed graph; every problem with it raises one CglowError naming what and where."""
    if not model.HasField("graph"):
        raise CglowError("the file holds no graph (not an ONNX model?)")
    model = expand_qoperators(upgrade(model))
    opset = _opset(model)
    # stored types before the ops built of others (decompose, function bodies): such an op computes in float32 and
    # rounds its result only, not each step (a bfloat16 GridSample's coordinates rounded per step read another
    # pixel); and after them, for the stored values that a body makes (an Attention's softmax_precision) or that a
    # node with a graph attribute (FlexAttention's score_mod) passed on as they are
    model = compute_stored(expand_functions(decompose(compute_stored(model), set(OPS), opset, max_memory), set(OPS),
                                            opset))
    g = model.graph
    consts = _constants(g, max_memory)
    inputs = _graph_inputs(g, consts, dict(shapes or {}))
    problems: list[str] = []  # every problem is reported, in one message
    types, batches = _input_types(inputs, dict(shapes or {}), max_memory, problems)
    types.update({k: TensorType(v.dtype, v.shape) for k, v in consts.items()})
    order, structure = topological_order(g, set(consts) | {v.name for v in inputs})
    if structure:
        raise ModelProblems(structure)
    nodes = _typed_nodes(g, order, inputs, consts, types, opset, max_memory, problems)
    _element_type_problems([v.name for v in inputs] + [o for n in nodes for o in n.outputs], types, problems)
    if problems:
        raise ModelProblems(problems)
    _check_outputs(g, types)
    _batch_notice(batches, types)
    return Graph(name=g.name or "model", opset=opset, inputs=tuple(v.name for v in inputs),
                 outputs=tuple(o.name for o in g.output), types=types, consts=consts, nodes=tuple(nodes),
                 source=source)


def _graph_inputs(g: onnx.GraphProto, consts: dict[str, np.ndarray], shapes: dict[str, tuple[int, ...]]) -> list:
    """The graph inputs that are not initializers; --shape must name only them, and no two may share a name."""
    inputs = [v for v in g.input if v.name not in consts]
    unknown = set(shapes) - {v.name for v in inputs}
    if unknown:
        raise CglowError(f"--shape names no graph input: {', '.join(sorted(unknown))} "
                         f"(inputs: {', '.join(v.name for v in inputs)})")
    names = [v.name for v in inputs]
    twice = sorted({repr(n) for n in names if names.count(n) > 1})
    if twice:
        raise CglowError(f"graph inputs with the same name: {', '.join(twice)}")
    return inputs


def _input_types(inputs: list, shapes: dict[str, tuple[int, ...]], max_memory: int,
                 problems: list[str]) -> tuple[dict[str, TensorType], dict[str, str]]:
    """Each input's type (its problems appended), and the symbolic first dimensions taken as 1."""
    types: dict[str, TensorType] = {}
    batches: dict[str, str] = {}
    for v in inputs:
        try:
            t, batch = _input_type(v, shapes)
            types[v.name] = checked_type(f"input '{v.name}'", t, max_memory)
        except CglowError as exc:
            problems.append(str(exc))
            continue
        if batch:
            batches[v.name] = batch
    return types, batches


def _typed_nodes(g: onnx.GraphProto, order: list[int], inputs: list, consts: dict[str, np.ndarray],
                 types: dict[str, TensorType], opset: int, max_memory: int, problems: list[str]) -> list[Node]:
    """The nodes in topological order, their outputs typed into `types` (constants folded into `consts`); the
    problems appended, the unsupported operators first, all of them named."""
    known = {o for p in g.node for o in p.output} | {v.name for v in inputs}
    nodes, unsupported, budget = [], {}, Budget(max_memory)
    pending = [(g.node[i], i) for i in reversed(order)]  # a stack: what a control-flow node becomes goes on top
    while pending:
        proto, i = pending.pop()
        if callable(proto):  # what follows a control-flow node's copies, now that they are typed
            _push(lambda: proto(consts, types), i, pending, consts, types, known, problems)
            continue
        if proto.domain not in ("", "ai.onnx"):
            unsupported.setdefault(f"{proto.domain}.{proto.op_type}", []).append(node_label(proto, i))
            continue
        try:
            node = _node(proto, i, opset, max_memory)
        except CglowError as exc:
            problems.append(str(exc))
            continue
        missing = [n for n in node.inputs if n and n not in types and n not in consts]
        dangling = [m for m in missing if m not in known]
        if dangling:
            problems.append(f"{node.describe()}: input '{dangling[0]}' is produced by no node, initializer or "
                            f"graph input")
            continue
        if missing:  # produced by a node that failed or is unsupported
            if shape_rule(node.op) is None and node.op not in CONTROL_FLOW and not _foldable(node, consts, types):
                unsupported.setdefault(node.op, []).append(node.name)
            continue
        if node.op in CONTROL_FLOW:  # even on constants: onnx's reference Loop stacks scalars as [n, 1]
            problem = input_type_problem(proto, node.describe(), opset, [types[n].dtype if n else None
                                                                         for n in node.inputs])
            if problem:
                problems.append(problem)
                continue
            try:
                looped = c_loop(proto, i, consts, types, budget, opset,
                                lambda body: import_model(body, None, node.name, max_memory))
            except CglowError as exc:
                problems.append(str(exc))
                continue
            if looped is not None:  # beyond the unrolling bound: a loop in C
                nodes.append(looped[0])
                types.update(looped[1])
                continue
            _push(lambda: CONTROL_FLOW[node.op](proto, i, consts, types, budget), i, pending, consts, types, known,
                  problems)
            continue
        try:
            out_types = _evaluate(proto, node, consts, types, opset, max_memory)
        except CglowError as exc:
            problems.append(str(exc))
            continue
        if out_types is None:
            unsupported.setdefault(node.op, []).append(node.name)
            continue
        try:
            out_types = _counted_types(node, types, out_types)
        except CglowError as exc:
            problems.append(str(exc))
            continue
        types.update((name, t) for name, t in zip(node.outputs, out_types) if name)
        if not all(name in consts for name in node.outputs):
            nodes.append(node)
    if unsupported:
        listing = "; ".join(f"{op} ({listed([repr(n) for n in names])})" for op, names in sorted(unsupported.items()))
        problems.insert(0, f"unsupported operators: {listing} (docs/ops.md lists the supported ones; export the "
                           f"model without them, or replace them with supported ops)")
    return nodes


def _push(step, i: int, pending: list, consts: dict, types: dict[str, TensorType], known: set[str],
          problems: list[str]) -> None:
    """A control-flow node's next Step (`step()`) on the stack of nodes to import: its nodes on top, in order, what
    follows them below, its constants known; or its refusal appended to the problems."""
    try:
        made: Step = step()
    except CglowError as exc:
        problems.append(str(exc))
        return
    consts.update(made.values)
    types.update((name, TensorType(v.dtype, v.shape)) for name, v in made.values.items())
    known.update(o for p in made.nodes for o in p.output)
    if made.then is not None:
        pending.append((made.then, i))
    pending += [(p, i) for p in reversed(made.nodes)]


PADDING_KEPT = ("Cast", "Identity")  # the ops that keep a run-time length's zero padding zero, and its count


def _counted_types(node: Node, types: dict[str, TensorType], out_types: list[TensorType]) -> list[TensorType]:
    """The output types of a node that reads a value of run-time length (TensorType.counted): a Cast or an Identity
    passes the count on; any other op is refused, as it would compute on the padding beyond the count."""
    counted = [n for n in node.inputs if n and types[n].counted is not None]
    if not counted:
        return out_types
    if node.op not in PADDING_KEPT:
        raise CglowError(f"{node.describe()}: input '{counted[0]}' ({types[counted[0]]}) has a length known only at "
                         f"run time; cglow passes such a value only to the graph's outputs (through Cast or Identity)")
    return [replace(t, counted=types[counted[0]].counted) for t in out_types]




def _node(proto: onnx.NodeProto, i: int, opset: int, max_memory: int) -> Node:
    """The node of proto (the i-th of the graph), once its schema under the model's opset accepts it."""
    described = describe(proto, i)
    problem = schema_problem(proto, described, opset)
    if problem:
        raise CglowError(problem)
    return Node(proto.op_type, node_label(proto, i), tuple(proto.input), tuple(proto.output),
                _attrs(proto, described, max_memory))


def _element_type_problems(names: list[str], types: dict[str, TensorType], problems: list[str]) -> None:
    """A problem naming the values (inputs and node outputs) of an element type the generated C has no type for."""
    bad_types: dict[str, list[str]] = {}
    for name in names:
        if name in types and types[name].dtype not in RUNTIME_DTYPES:
            bad_types.setdefault(types[name].dtype.name, []).append(name)
    if bad_types:
        problems.append("unsupported element types at run time (cglow runs float32, bool and 8- to 64-bit "
                        "integers): " + "; ".join(f"{t} ({listed([repr(n) for n in names])})"
                                                  for t, names in sorted(bad_types.items())))
