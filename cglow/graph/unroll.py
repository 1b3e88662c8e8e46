"""Loop and Scan unrolled at import (graph/control_flow.py): one copy of the body per iteration, its values renamed
apart, the loop-carried values threaded from each copy to the next. A Scan's inputs are sliced along their scanned
axes (a Slice and a Reshape: views) and its scan outputs stacked (a Reshape and a Concat), in the directions and
along the axes it says. A Loop runs while its trip count and its condition allow, both constants: the condition a
copy leaves must fold to a constant before the next copy is made. The copies count against UNROLL_LIMIT
(subgraphs.py). SHAPE_INPUTS names the inputs that must be constants (the backend pins them, tools/backend.py)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper

from ..errors import CglowError
from .inferred import value_shapes
from .ir import TensorType
from .subgraphs import Budget, Step, copied
from .topology import describe, node_label

SHAPE_INPUTS = {"Loop": (0, 1)}  # a Loop's trip count and condition: how many copies of its body


def node_body(proto: onnx.NodeProto, described: str, inputs: int, outputs: int) -> onnx.GraphProto:
    """The node's body, once it has the numbers of inputs and outputs that the node's say it must."""
    body = next(a.g for a in proto.attribute if a.name == "body")
    if (len(body.input), len(body.output)) != (inputs, outputs):
        raise CglowError(f"{described}: its body has {len(body.input)} inputs and {len(body.output)} outputs, where "
                         f"its inputs and outputs call for {inputs} and {outputs}")
    return body


def int_list(proto: onnx.NodeProto, name: str, count: int, described: str) -> list[int]:
    """An ints attribute of `count` values (zeros when the node leaves it out)."""
    given = next((list(a.ints) for a in proto.attribute if a.name == name), [0] * count)
    if len(given) != count:
        raise CglowError(f"{described}: attribute '{name}' has {len(given)} values, for {count}")
    return given


def _stacked(pieces: list[str], axis: int, out: str, prefix: str, types: dict[str, TensorType],
             described: str) -> tuple[list[onnx.NodeProto], dict[str, np.ndarray]]:
    """The per-iteration values `pieces`, of one shape, stacked along a new axis (negative: from the end of the
    stacked rank) into `out`: each reshaped with a 1 there, then concatenated."""
    shapes = {types[p].shape for p in pieces}
    if len(shapes) != 1:
        raise CglowError(f"{described}: the iterations give scan output '{out}' the shapes "
                         f"{', '.join(map(str, sorted(shapes)))}; they are stacked, which needs one shape")
    shape = shapes.pop()
    axis = axis + len(shape) + 1 if axis < 0 else axis
    if not 0 <= axis <= len(shape):
        raise CglowError(f"{described}: scan output axis {axis} is out of range for rank {len(shape) + 1}")
    dims = f"{prefix}shape"
    nodes = [helper.make_node("Reshape", [p, dims], [f"{prefix}{k}"], f"{prefix}{k}") for k, p in enumerate(pieces)]
    nodes.append(helper.make_node("Concat", [n.output[0] for n in nodes], [out], f"{prefix}concat", axis=axis))
    return nodes, {dims: np.array(shape[:axis] + (1,) + shape[axis:], np.int64)}


def _passed(states: list[str], outputs) -> list[onnx.NodeProto]:
    """The final loop-carried values passed on to the node's outputs."""
    return [helper.make_node("Identity", [s], [out], f"{out}/final") for s, out in zip(states, outputs) if out]


class _Loop:
    """A Loop being unrolled, one iteration per Step: called once its last copy is typed, it makes the next copy
    or, when the trip count or the condition says stop, passes the final values on and stacks the scan outputs."""

    def __init__(self, proto: onnx.NodeProto, i: int, consts: dict, budget: Budget):
        self.label, self.described = node_label(proto, i), describe(proto, i)
        self.proto, self.budget = proto, budget
        self.body = node_body(proto, self.described, len(proto.input), len(proto.output) + 1)
        given = [proto.input[k] if len(proto.input) > k and proto.input[k] else None for k in (0, 1)]
        for name, what in zip(given, ("trip count", "condition")):
            if name is not None and name not in consts:
                raise CglowError(f"{self.described}: its {what} (input '{name}') is known only at run time; cglow "
                                 f"unrolls a Loop whose trip count and condition are constants")
            if name is not None and consts[name].size != 1:
                raise CglowError(f"{self.described}: its {what} must hold one value, not {consts[name].size}")
        self.trips = int(consts[given[0]].reshape(-1)[0]) if given[0] else None
        self.cond, self.cond_driven = given[1], given[1] is not None
        if self.trips is None and not self.cond_driven:
            raise CglowError(f"{self.described}: it has neither a trip count nor a condition: it runs forever")
        self.states = list(proto.input[2:])
        self.scans: list[list[str]] = [[] for _ in range(len(self.body.output) - 1 - len(self.states))]
        self.k = 0
        if self.trips is not None and not self.cond_driven:  # counted per copy; a long for-loop refused up front
            budget.ensure(self.trips * len(self.body.node), self.described,
                          f"{self.trips} iterations of {len(self.body.node)} nodes")

    def __call__(self, consts: dict, types: dict[str, TensorType]) -> Step:
        if self.cond is not None and self.cond not in types:  # the last copy failed: that is reported
            return Step()
        if self.cond_driven and self.cond not in consts:
            raise CglowError(f"{self.described}: the condition that iteration {self.k} leaves is known only at "
                             f"run time; cglow unrolls a Loop whose condition folds to a constant each iteration")
        going = not self.cond_driven or bool(consts[self.cond].reshape(-1)[0])
        if going and (self.trips is None or self.k < self.trips):
            return self._iteration()
        return self._finish(types)

    def _iteration(self) -> Step:
        prefix = f"{self.label}/{self.k}/"
        self.budget.unroll(len(self.body.node), self.described, f"iteration {self.k} of {len(self.body.node)} nodes")
        counter = f"{self.label}/{self.k}.iteration"  # not '/' after k: apart from the names of the copy's values
        values = {counter: np.array(self.k, np.int64)}
        cond_in = self.cond if self.cond_driven else f"{self.label}/{self.k}.true"
        if not self.cond_driven:
            values[cond_in] = np.array(True)
        inputs = [v.name for v in self.body.input]
        bound = dict(zip(inputs, [counter, cond_in] + self.states))
        nodes, body_values, renamed = copied(self.body, prefix, bound, self.budget)
        outputs = [renamed(v.name) for v in self.body.output]
        self.cond = outputs[0] if self.cond_driven else None
        self.states = outputs[1:1 + len(self.states)]
        for pieces, piece in zip(self.scans, outputs[1 + len(self.states):]):
            pieces.append(piece)
        self.k += 1
        return Step(nodes, {**values, **body_values}, self)

    def _finish(self, types: dict[str, TensorType]) -> Step:
        nodes = _passed(self.states, self.proto.output)
        values = {}
        for j, (pieces, out) in enumerate(zip(self.scans, self.proto.output[len(self.states):])):
            if not out:
                continue
            if not pieces:
                raise CglowError(f"{self.described}: it runs no iteration, and its scan output '{out}' would be "
                                 f"empty")
            if any(p not in types for p in pieces):
                return Step()
            stacked, shape = _stacked(pieces, 0, out, f"{self.label}/scan{j}/", types, self.described)
            nodes += stacked
            values.update(shape)
        return Step(nodes, values)


def loop_step(proto: onnx.NodeProto, i: int, consts: dict, types: dict[str, TensorType], budget: Budget) -> Step:
    """A Loop (the i-th node of its graph) unrolled: its first copy of the body, or its outputs if it runs none."""
    return _Loop(proto, i, consts, budget)(consts, types)


@dataclass(frozen=True)
class ScanForm:
    """A Scan node's body and attributes, checked: its loop-carried values' count, its scanned inputs, each one's
    axis (counted from the start) and direction (1: backward), each scan output's axis (as given: a negative one
    counts from the end of the stacked rank) and direction, and the iterations (the scanned axes' length)."""
    body: onnx.GraphProto
    n_states: int
    scanned: list[str]
    axes: list[int]
    in_reverse: list[int]
    out_axes: list[int]
    out_reverse: list[int]
    steps: int


def scan_form(proto: onnx.NodeProto, described: str, types: dict[str, TensorType]) -> ScanForm:
    """The Scan node's ScanForm, or its problem named."""
    count = next(a.i for a in proto.attribute if a.name == "num_scan_inputs")
    if not 0 < count <= len(proto.input):
        raise CglowError(f"{described}: num_scan_inputs is {count}, of {len(proto.input)} inputs")
    body = node_body(proto, described, len(proto.input), len(proto.output))
    n_states = len(proto.input) - count
    scanned = list(proto.input[n_states:])
    n_outputs = len(body.output) - n_states
    in_axes, in_reverse, out_axes, out_reverse = (int_list(proto, name, n, described) for name, n in (
        ("scan_input_axes", count), ("scan_input_directions", count), ("scan_output_axes", n_outputs),
        ("scan_output_directions", n_outputs)))
    shapes = [types[x].shape for x in scanned]
    axes = [a + len(s) if a < 0 else a for a, s in zip(in_axes, shapes)]
    if any(not 0 <= a < len(s) for a, s in zip(axes, shapes)):
        raise CglowError(f"{described}: a scan input axis is out of range: axes {in_axes} of shapes {shapes}")
    lengths = {s[a] for a, s in zip(axes, shapes)}
    if len(lengths) != 1:
        raise CglowError(f"{described}: its scan inputs have the lengths {sorted(lengths)} along their axes")
    steps = lengths.pop()
    if not steps and any(proto.output[n_states:]):
        raise CglowError(f"{described}: its scan inputs are empty along their axes, and so would be its scan outputs")
    return ScanForm(body, n_states, scanned, axes, in_reverse, out_axes, out_reverse, steps)


def scan_step(proto: onnx.NodeProto, i: int, consts: dict, types: dict[str, TensorType], budget: Budget) -> Step:
    """A Scan (the i-th node of its graph) unrolled: every copy of its body, each reading its inputs' slices at
    its position, then (once typed) the scan outputs stacked."""
    label, described = node_label(proto, i), describe(proto, i)
    form = scan_form(proto, described, types)
    body, n_states, scanned, axes, in_reverse, steps = (form.body, form.n_states, form.scanned, form.axes,
                                                        form.in_reverse, form.steps)
    out_axes, out_reverse, n_outputs = form.out_axes, form.out_reverse, len(form.out_axes)
    shapes = [types[x].shape for x in scanned]
    budget.unroll(steps * len(body.node), described, f"{steps} iterations of {len(body.node)} nodes")
    values = {f"{label}/axis{a}": np.array([a], np.int64) for a in set(axes)}
    values.update({f"{label}/in{j}/shape": np.array(s[:a] + s[a + 1:], np.int64)
                   for j, (a, s) in enumerate(zip(axes, shapes))})
    nodes, states, pieces = [], list(proto.input[:n_states]), [[] for _ in range(n_outputs)]
    for t in range(steps):
        prefix = f"{label}/{t}/"
        slices = []
        for j, (x, a, back) in enumerate(zip(scanned, axes, in_reverse)):
            at = steps - 1 - t if back else t
            values[f"{label}/at{at}"], values[f"{label}/to{at}"] = np.array([at], np.int64), np.array([at + 1], np.int64)
            piece = f"{label}/{t}.in{j}"  # not '/' after t: apart from the names of the copy's values
            nodes += [helper.make_node("Slice", [x, f"{label}/at{at}", f"{label}/to{at}", f"{label}/axis{a}"],
                                       [f"{piece}/slice"], f"{piece}/slice"),
                      helper.make_node("Reshape", [f"{piece}/slice", f"{label}/in{j}/shape"], [piece], piece)]
            slices.append(piece)
        copy, body_values, renamed = copied(body, prefix, dict(zip([v.name for v in body.input], states + slices)),
                                            budget)
        nodes += copy
        values.update(body_values)
        outputs = [renamed(v.name) for v in body.output]
        states = outputs[:n_states]
        for made, piece in zip(pieces, outputs[n_states:]):
            made.append(piece)

    def stack(consts: dict, types: dict[str, TensorType]) -> Step:
        nodes, values = _passed(states, proto.output), {}
        for j, (made, out) in enumerate(zip(pieces, proto.output[n_states:])):
            if not out:
                continue
            if any(p not in types for p in made):  # a copy failed: that is reported
                return Step()
            stacked, shape = _stacked(made[::-1] if out_reverse[j] else made, out_axes[j], out,
                                      f"{label}/scan{j}/", types, described)
            nodes += stacked
            values.update(shape)
        return Step(nodes, values)
    return Step(nodes, values, stack)


def scans_per_batch(model: onnx.ModelProto) -> tuple[onnx.ModelProto, set[str]]:
    """An opset-8 model whose Scan nodes (whose values have a batch axis first) are each one Scan per batch item,
    of that item's values (a Slice and a Squeeze), their outputs stacked (an Unsqueeze and a Concat): onnx's
    version converter, which turns a Scan-8 into a Scan-9 by dropping the batch axis from the shapes of its values,
    then keeps its meaning. With the values it names (whose shapes the converter writes wrong)."""
    if not any(n.op_type == "Scan" and n.domain in ("", "ai.onnx") for n in model.graph.node):
        return model, set()
    shapes = value_shapes(model)
    nodes, made = [], set()
    for i, node in enumerate(model.graph.node):
        if node.op_type != "Scan" or node.domain not in ("", "ai.onnx"):
            nodes.append(node)
            continue
        split = _per_batch(node, describe(node, i), node_label(node, i), shapes)
        made |= {o for n in split for o in n.output} - set(node.output)
        nodes += split
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    return out, made


def _per_batch(node: onnx.NodeProto, described: str, label: str,
               shapes: dict[str, tuple[int, ...]]) -> list[onnx.NodeProto]:
    """A Scan-8 node as one per batch item (scans_per_batch), at opset 8."""
    if node.input[0]:
        raise CglowError(f"{described}: sequence_lens (a Scan-8 input) is not supported")
    batch = next((shapes[x][0] for x in node.input[1:] if x in shapes and shapes[x]), None)
    if batch is None:
        raise CglowError(f"{described}: the batch size of its inputs must be static")
    nodes = []
    for b in range(batch):
        prefix = f"{label}/batch{b}/"
        item = onnx.NodeProto()
        item.CopyFrom(node)
        item.name = f"{prefix}scan"
        item.input[:] = [""] + [f"{prefix}{x}" for x in node.input[1:]]
        item.output[:] = [f"{prefix}{y}" if y else "" for y in node.output]
        for x in node.input[1:]:
            nodes += [helper.make_node("Slice", [x], [f"{prefix}{x}/slice"], starts=[b], ends=[b + 1], axes=[0]),
                      helper.make_node("Squeeze", [f"{prefix}{x}/slice"], [f"{prefix}{x}"], axes=[0])]
        nodes.append(item)
        nodes += [helper.make_node("Unsqueeze", [f"{prefix}{y}"], [f"{prefix}{y}/item"], axes=[0])
                  for y in node.output if y]
    return nodes + [helper.make_node("Concat", [f"{label}/batch{b}/{y}/item" for b in range(batch)], [y], axis=0)
                    for y in node.output if y]
