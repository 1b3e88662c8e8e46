"""Random control flow: If on a constant condition or on one computed from an exact value (cglow then computes both
branches), its branches different small subgraphs of the values around them; Loop over a constant trip count,
its body updating a loop-carried value from the values around it and its iteration number, with a scan output;
Scan along any axis in either direction, its state updated by each slice, its scan output stacked along any axis
in either direction. A Loop or Scan is short (unrolled at import) or long (beyond cglow's UNROLL_LIMIT copied nodes:
one body run as a loop in C). The bodies are built with onnx.helper; the Builder validates the node that holds
them. Each update is a contraction (tanh of a multiple under 1), so that rounding does not grow over iterations."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T, helper, numpy_helper

from cglow.graph.subgraphs import UNROLL_LIMIT

from .builder import Builder, Value, broadcastable
from .tensors import ints


class Body:
    """A subgraph under construction: its nodes and initializers, named apart from the graph's by the Builder."""

    def __init__(self, b: Builder):
        self.b, self.nodes, self.inits = b, [], []

    def const(self, array: np.ndarray) -> str:
        name = self.b.name("const")
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(self, op: str, inputs: list[str], **attrs) -> str:
        name = self.b.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [name], name=self.b.name(op), **attrs))
        return name

    def graph(self, inputs: list[onnx.ValueInfoProto], outputs: list[tuple[str, int, tuple[int, ...]]]):
        return helper.make_graph(self.nodes, self.b.name("body"), inputs,
                                 [helper.make_tensor_value_info(n, e, s) for n, e, s in outputs], self.inits)

    def update(self, state: str, shape: tuple[int, ...], step: str) -> str:
        """tanh(a * state + step), |a| < 1, sometimes through a matrix of norm under 1 along the last axis."""
        if shape and shape[-1] <= 16 and self.b.chance(0.3):
            d = shape[-1]
            w = (self.b.rng.standard_normal((d, d)) * 0.3 / np.sqrt(d)).astype(np.float32)
            state = self.node("MatMul", [state, self.const(w)])
        scaled = self.node("Mul", [state, self.const(np.float32(self.b.uniform(-0.9, 0.9)))])
        return self.node("Tanh", [self.node("Add", [scaled, step])])


def outer(b: Builder, x: Value) -> str:
    """A value around the node that broadcasts to x's shape without growing it, or a constant that does."""
    fits = [v for v in b.values if v.elem == T.FLOAT and not v.final and broadcastable(v.shape, x.shape) and
            len(v.shape) <= x.rank and np.broadcast_shapes(v.shape, x.shape) == x.shape]
    return b.choice(fits).name if fits and b.chance(0.7) else b.weights(*b.broadcast_shape(x.shape)[-x.rank:])


def branch(b: Builder, x: Value) -> onnx.GraphProto:
    """One or two small ops of x and another value around it: an output of x's shape."""
    body, y = Body(b), x.name
    for _ in range(b.int(1, 2)):
        op = b.choice(["Add", "Mul", "Tanh", "Neg", "Sigmoid"])
        y = body.node(op, [y, outer(b, x)] if op in ("Add", "Mul") else [y])
    return body.graph([], [(y, T.FLOAT, x.shape)])


def if_(b: Builder) -> None:
    """If on a constant condition, or on whether the largest of an exact value exceeds a threshold."""
    x = b.pick()
    if b.chance(0.4):
        cond = b.const(np.array(b.chance(0.5)))
    else:
        (top,) = b.node(b.choice(["ReduceMax", "ReduceMin"]), [b.pick(exact=True).name], keepdims=0, exact=True)
        cond = b.node("Greater", [top.name, b.const(np.float32(b.uniform(-0.5, 1.5)))], exact=True)[0].name
    b.node("If", [cond], then_branch=branch(b, x), else_branch=branch(b, x))


def long_trips(body: Body) -> int:
    """A trip count whose unrolled copies of the body go beyond UNROLL_LIMIT."""
    return UNROLL_LIMIT // len(body.nodes) + body.b.int(1, 30)


def loop(b: Builder) -> None:
    """Loop over a constant trip count (0 to 4, or beyond the unroll bound), its condition true (given or not):
    the loop-carried value updated from a value around it and the iteration number; when it runs, the mean of each
    update a scan output (each update too, on short loops). ONNX shape inference leaves the Loop's output shapes
    unknown: each output is reshaped to the shape onnxruntime gives it."""
    x = b.pick()
    body = Body(b)
    i, cond, c = b.name("iteration"), b.name("cond"), b.name("carried")
    step = body.node("Mul", [body.node("Cast", [i], to=T.FLOAT), body.const(np.float32(b.uniform(-0.01, 0.01)))])
    updated = body.update(c, x.shape, body.node("Add", [outer(b, x), step]))
    outputs = [(body.node("Identity", [cond]), T.BOOL, ()), (updated, T.FLOAT, x.shape)]
    long = b.chance(0.3)
    trips = b.int(0, 4)
    if trips or long:
        outputs.append((body.node("ReduceMean", [updated], keepdims=0), T.FLOAT, ()))
    if trips and not long and b.chance(0.5):
        outputs.append((body.node("Identity", [updated]), T.FLOAT, x.shape))
    if long:
        trips = long_trips(body)
    inputs = [helper.make_tensor_value_info(i, T.INT64, []), helper.make_tensor_value_info(cond, T.BOOL, []),
              helper.make_tensor_value_info(c, T.FLOAT, x.shape)]
    given = b.const(np.array(True)) if b.chance(0.5) else ""
    made = [b.name("loop") for _ in outputs[1:]]
    b.nodes.append(helper.make_node("Loop", [b.const(np.array(trips, np.int64)), given, x.name], made,
                                    name=b.name("Loop"), body=body.graph(inputs, outputs)))
    for name, shape in zip(made, [x.shape, (trips,), (trips, *x.shape)]):
        b.node("Reshape", [name, b.const(ints(shape))])  # which validates the Loop too


def scan(b: Builder) -> None:
    """Scan of a value along an axis (or, long, of a constant sequence of scalars), the state starting at the
    value's mean over that axis; a scan output of each state or sum, stacked along any axis."""
    x = b.pick(lambda v: v.rank >= 1)
    long = b.chance(0.25)
    axis = b.int(0, x.rank - 1)
    if long:
        (state,) = b.node("ReduceMean", [x.name], keepdims=0)
        slice_shape: tuple[int, ...] = ()
    else:
        (state,) = b.node("ReduceMean", [x.name, b.const(ints([axis]))], keepdims=0)
        slice_shape = x.shape[:axis] + x.shape[axis + 1:]
    body = Body(b)
    s, piece = b.name("state"), b.name("slice")
    updated = body.update(s, slice_shape, piece)
    # a body output twice (the state and its scan output) onnxruntime gets wrong (a final state of zeros)
    out = body.node("Add", [updated, piece]) if b.chance(0.5) else body.node("Identity", [updated])
    if long:
        sequence = b.weights(long_trips(body), scale=0.5)
        axis = 0
    else:
        sequence = x.name
    inputs = [helper.make_tensor_value_info(n, T.FLOAT, slice_shape) for n in (s, piece)]
    rank = len(slice_shape) + 1
    b.node("Scan", [state.name, sequence], outputs=2,
           body=body.graph(inputs, [(updated, T.FLOAT, slice_shape), (out, T.FLOAT, slice_shape)]),
           num_scan_inputs=1, scan_input_axes=[axis - x.rank if b.chance(0.3) and not long else axis],
           scan_input_directions=[b.int(0, 1)], scan_output_axes=[b.int(-rank, rank - 1)],
           scan_output_directions=[b.int(0, 1)])


GENERATORS = [(if_, 1), (loop, 1), (scan, 1)]
