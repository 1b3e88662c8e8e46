"""A Loop or a Scan whose unrolled copies would go beyond UNROLL_LIMIT (subgraphs.py) as one Repeat node: its body
imported once, as a graph of its own, which the lowering runs in a loop in C (lower/repeat.py). The body's inputs
are its iteration number (a Loop's), its loop-carried values, its scan inputs' slices, and the values it reads from
around it that are known only at run time (the constant ones become its initializers); its outputs are its new
loop-carried values and its scan outputs' slices. The body is typed once, for every iteration: what would depend on
the iteration (a shape, a folded constant) is refused by name when its import or these checks find it. A Loop whose
condition input is given runs as a loop in C only when the condition its body leaves is always true; otherwise it
is unrolled, for as long as that condition folds."""
from __future__ import annotations

from typing import Callable

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..errors import CglowError
from .ir import Graph, Node, TensorType
from .subgraphs import Budget
from .topology import describe, node_label
from .unroll import node_body, scan_form

REPEAT = "Repeat"  # the op of the node; not an ONNX op, so that no model can name it
TRIPS = 2 ** 31 - 1  # the most iterations: the C loop counts in int32_t


def _defined_and_read(graph: onnx.GraphProto) -> tuple[set[str], set[str]]:
    """The names a graph defines (its inputs, initializers and node outputs, its subgraphs' too) and reads."""
    defined = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    read: set[str] = {v.name for v in graph.output}
    for node in graph.node:
        defined.update(node.output)
        read.update(n for n in node.input if n)
        for a in node.attribute:
            for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                inner_defined, inner_read = _defined_and_read(g)
                defined |= inner_defined
                read |= inner_read
    return defined, read


def _input(name: str, t: TensorType) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(t.dtype), list(t.shape))


def _body_model(body: onnx.GraphProto, given: list[tuple[str, TensorType]], initial: dict[str, np.ndarray],
                consts: dict, types: dict[str, TensorType], opset: int) -> tuple[onnx.ModelProto, list[str]]:
    """The body as a model of its own: its inputs `given` (name, type), the values `initial` as initializers, and
    what it reads from around it (constants as initializers, the rest as inputs after `given`); with the names of
    those last inputs."""
    defined, read = _defined_and_read(body)
    outer = sorted(n for n in read - defined - set(initial) if n in types or n in consts)
    captured = [n for n in outer if n not in consts]
    g = onnx.GraphProto()
    g.CopyFrom(body)
    del g.input[:]
    g.input.extend([_input(n, t) for n, t in given] + [_input(n, types[n]) for n in captured])
    g.initializer.extend(numpy_helper.from_array(np.asarray(v), n) for n, v in
                         [(n, consts[n]) for n in outer if n in consts] + list(initial.items()))
    del g.output[:]
    g.output.extend(helper.make_empty_tensor_value_info(v.name) for v in body.output)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), captured


def c_loop(proto: onnx.NodeProto, i: int, consts: dict, types: dict[str, TensorType], budget: Budget, opset: int,
           import_body: Callable[[onnx.ModelProto], Graph]) -> tuple[Node, dict[str, TensorType]] | None:
    """The Loop or Scan (the i-th node of its graph) as a Repeat node with its outputs' types, or None when it is
    to be unrolled: its copies fit the budget, or (a Loop) its trip count or condition are not constants, which
    the unrolling refuses or follows."""
    if proto.op_type not in ("Loop", "Scan"):
        return None
    described, label = describe(proto, i), node_label(proto, i)
    if proto.op_type == "Loop":
        body = node_body(proto, described, len(proto.input), len(proto.output) + 1)
        trip, cond = (proto.input[k] if len(proto.input) > k else "" for k in (0, 1))
        if not trip or trip not in consts or cond and (cond not in consts or not consts[cond].reshape(-1)[0]):
            return None
        trips, n_states = int(consts[trip].reshape(-1)[0]), len(proto.input) - 2
        states, scanned, ins, outs = list(proto.input[2:]), [], [], [(0, 0)] * (len(proto.output) - n_states)
        given = [(body.input[0].name, TensorType(np.dtype(np.int64), ()))]
        initial = {body.input[1].name: np.array(True)}
    else:
        form = scan_form(proto, described, types)
        body, n_states, scanned, trips = form.body, form.n_states, form.scanned, form.steps
        states = list(proto.input[:n_states])
        ins, outs = list(zip(form.axes, form.in_reverse)), list(zip(form.out_axes, form.out_reverse))
        given, initial = [], {}
    if budget.fits(trips * len(body.node)):
        return None
    if trips > TRIPS:
        raise CglowError(f"{described}: {trips} iterations; a loop in C counts at most {TRIPS}")
    first = len(given) + len(initial)
    given += [(body.input[first + k].name, types[s]) for k, s in enumerate(states)]
    given += [(v.name, TensorType(types[x].dtype, types[x].shape[:a] + types[x].shape[a + 1:]))
              for v, x, (a, _) in zip(body.input[first + n_states:], scanned, ins)]
    model, captured = _body_model(body, given, initial, consts, types, opset)
    what = f"{trips} iterations of {len(body.node)} nodes, beyond the unrolling bound"
    try:
        graph = import_body(model)
    except CglowError as exc:
        raise CglowError(f"{described}: {what}, its body is compiled once as a loop in C: {exc}") from None
    if proto.op_type == "Loop":  # with a condition input, the condition each iteration leaves counts
        cond_out = graph.outputs[0]
        if cond and (cond_out not in graph.consts or not graph.consts[cond_out].reshape(-1)[0]):
            return None  # it may stop early: unrolled while its condition folds, else refused
        graph = graph.with_nodes(graph.nodes, outputs=graph.outputs[1:])
    varying = [out for out in graph.outputs if graph.types[out].counted is not None]
    if varying:
        raise CglowError(f"{described}: {what}: its body's output '{varying[0]}' has a run-time length; a loop in C "
                         f"stacks slices of one length")
    for k, (s, out) in enumerate(zip(states, graph.outputs)):
        if graph.types[out] != types[s]:
            raise CglowError(f"{described}: {what}: its loop-carried value {k} ('{s}') enters as {types[s]} and "
                             f"leaves an iteration as {graph.types[out]}; a loop in C needs one type")
    out_types = {name: types[s] for name, s in zip(proto.output, states) if name}
    for name, piece, (axis, _) in zip(proto.output[n_states:], graph.outputs[n_states:], outs):
        t = graph.types[piece]
        axis = axis + len(t.shape) + 1 if axis < 0 else axis
        if not 0 <= axis <= len(t.shape):
            raise CglowError(f"{described}: scan output axis {axis} is out of range for rank {len(t.shape) + 1}")
        if name:
            out_types[name] = TensorType(t.dtype, t.shape[:axis] + (trips,) + t.shape[axis:])
    outs = [(a + len(graph.types[p].shape) + 1 if a < 0 else a, back)
            for p, (a, back) in zip(graph.outputs[n_states:], outs)]
    node = Node(REPEAT, label, tuple(states + scanned + captured), tuple(proto.output),
                dict(body=graph, trips=trips, states=n_states, scans_in=tuple(ins), scans_out=tuple(outs),
                     counter=proto.op_type == "Loop", loop=proto.op_type))
    return node, out_types
