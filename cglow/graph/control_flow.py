"""Control flow at import (graph/onnx_import.py): an If, a Loop or a Scan becomes copies of its subgraphs in its
place, which compile like the rest of the graph. An If whose condition is a constant is the branch it takes; an
If whose condition is known only at run time is both branches, each output selected by a Where on the
condition (the branches must give the same shapes). Loop and Scan are unrolled (graph/unroll.py), or beyond the
unrolling bound run as a loop in C (graph/c_loop.py). LIMITS says what each refuses, for docs/ops.md."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from ..errors import CglowError
from .ir import TensorType
from .stored_types import COMPUTED_AS
from .subgraphs import UNROLL_LIMIT, Budget, Step, copied
from .topology import describe, node_label
from .unroll import loop_step, scan_step


def if_step(proto: onnx.NodeProto, i: int, consts: dict, types: dict[str, TensorType], budget: Budget) -> Step:
    """An If (the i-th node of its graph) as the branch its constant condition takes, or as both branches and a
    Where per output."""
    cond, label = proto.input[0], node_label(proto, i)
    if types[cond].size != 1:
        raise CglowError(f"{describe(proto, i)}: the condition must hold one value, not {types[cond].size}")
    branches = {a.name: a.g for a in proto.attribute if a.type == onnx.AttributeProto.GRAPH}
    for name, g in sorted(branches.items()):
        if len(g.output) != len(proto.output):
            raise CglowError(f"{describe(proto, i)}: its {name} gives {len(g.output)} outputs, for its "
                             f"{len(proto.output)}")
    if cond in consts:
        taken = "then_branch" if bool(consts[cond].reshape(-1)[0]) else "else_branch"
        nodes, values, renamed = copied(branches[taken], f"{label}/", {}, budget)
        return Step(nodes + [helper.make_node("Identity", [renamed(v.name)], [out], f"{label}/{out}")
                             for v, out in zip(branches[taken].output, proto.output) if out], values)
    then_nodes, then_values, then_name = copied(branches["then_branch"], f"{label}/then/", {}, budget)
    else_nodes, else_values, else_name = copied(branches["else_branch"], f"{label}/else/", {}, budget)
    scalar, no_dims = f"{label}/cond", f"{label}/scalar_shape"
    pairs = [(then_name(t.name), else_name(e.name), out) for t, e, out in
             zip(branches["then_branch"].output, branches["else_branch"].output, proto.output) if out]

    def select(consts: dict, types: dict[str, TensorType]) -> Step:
        if any(a not in types or b not in types for a, b, _ in pairs):  # a branch failed: that is reported
            return Step()
        for k, (a, b, out) in enumerate(pairs):
            if types[a] != types[b]:
                raise CglowError(f"{describe(proto, i)}: its condition is known only at run time, and its branches "
                                 f"give output {k} ('{out}') as {types[a]} and {types[b]}; cglow computes both "
                                 f"branches and selects, which needs the same type and shape")
        return Step([node for a, b, out in pairs for node in _selected(scalar, a, b, out, types[a], f"{label}/{out}")])
    reshape = helper.make_node("Reshape", [cond, no_dims], [scalar], scalar)
    return Step(then_nodes + else_nodes + [reshape],
                {**then_values, **else_values, no_dims: np.zeros(0, np.int64)}, select)


def _selected(cond: str, a: str, b: str, out: str, t: TensorType, name: str) -> list[onnx.NodeProto]:
    """out = Where(cond, a, b); a stored type's values (graph/stored_types.py) selected in their computing type,
    which holds them exactly, and cast back."""
    stored = helper.np_dtype_to_tensor_dtype(t.dtype)
    if stored not in COMPUTED_AS:
        return [helper.make_node("Where", [cond, a, b], [out], name)]
    widened = [helper.make_node("Cast", [v], [f"{name}/{k}"], f"{name}/{k}", to=COMPUTED_AS[stored])
               for k, v in (("then", a), ("else", b))]
    return widened + [helper.make_node("Where", [cond, f"{name}/then", f"{name}/else"], [f"{name}/selected"], name),
                      helper.make_node("Cast", [f"{name}/selected"], [out], f"{name}/stored", to=stored)]


CONTROL_FLOW = {"If": if_step, "Loop": loop_step, "Scan": scan_step}
UNROLLED = (f"unrolled, up to {UNROLL_LIMIT} copied nodes in a model; beyond, one body run as a loop in C, whose "
            f"shapes and constants must not depend on the iteration (graph/c_loop.py)")
LIMITS = {
    "If": ["a condition known only at run time computes both branches, which must give the same types and shapes"],
    "Loop": [UNROLLED, "its trip count and condition must be constants, and the condition that each iteration leaves "
             "(when the Loop has a condition input) must fold to a constant", "as a loop in C, its trip count must be "
             "a constant, its condition true, and its loop-carried values must keep their types",
             "a Loop that runs no iteration has no scan outputs"],
    "Scan": [UNROLLED, "Scan-8 (opset 8) without sequence_lens"],
}
