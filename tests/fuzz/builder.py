"""A random ONNX graph under construction: its values with their static shapes (from ONNX shape inference,
which also rejects an invalid node), constants, and helpers to pick inputs for the next node."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto as T, helper, numpy_helper

OPSET = 23  # the newest that onnxruntime and cglow both take: RMSNormalization, Attention, RotaryEmbedding
MAX_ELEMENTS = 4096  # per value: graphs stay small, so that many fit in a CI run


@dataclass(frozen=True)
class Value:
    """A value of the graph. An `exact` one is computed without rounding from the graph inputs, so that a
    discontinuous op (Floor, ArgMax, a comparison) may read it: cglow and onnxruntime see the same numbers. A `final`
    one (of a length known at run time only: NonZero's...) is a graph output, and no node reads it."""
    name: str
    shape: tuple[int, ...]
    elem: int = T.FLOAT
    exact: bool = False
    final: bool = False

    @property
    def rank(self) -> int:
        return len(self.shape)


class Rejected(Exception):
    """The node cannot be built here (no suitable input, or ONNX refuses it): the attempt is rolled back."""


def broadcastable(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return all(x == y or 1 in (x, y) for x, y in zip(reversed(a), reversed(b)))


class Choices:
    """Seeded random choices, which the graph builders share (this one, tests/fuzz/quantized.py's)."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def choice(self, options):
        return options[int(self.rng.integers(len(options)))]

    def int(self, low: int, high: int) -> int:
        """An integer in [low, high]."""
        return int(self.rng.integers(low, high + 1))


class Builder(Choices):
    def __init__(self, rng: np.random.Generator, opset: int = OPSET):
        super().__init__(rng)
        self.opset = opset
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.inputs: list[Value] = []
        self.bounds: dict[str, int] = {}
        self.values: list[Value] = []
        self.declared: set[str] = set()
        self.count = 0

    # --- random choices ---------------------------------------------------------------------------
    def uniform(self, low: float, high: float) -> float:
        return float(np.float32(self.rng.uniform(low, high)))

    def pick(self, accept=lambda v: True, exact: bool = False, empty: bool = False) -> Value:
        """A float value that `accept`s (and is not empty unless `empty`: most generators size their
        attributes from the dims), recent ones likelier (chains), older ones too (branches and skip
        connections)."""
        found = [v for v in self.values if v.elem == T.FLOAT and accept(v) and (v.exact or not exact) and
                 (empty or 0 not in v.shape) and not v.final]
        if not found:
            raise Rejected("no value fits")
        weights = np.arange(1, len(found) + 1, dtype=float) ** 2
        return found[int(self.rng.choice(len(found), p=weights / weights.sum()))]

    def broadcast_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """A shape that broadcasts with `shape`: a suffix of it with some dims 1, now and then one more dim."""
        out = tuple(1 if self.chance(0.3) else d for d in shape[len(shape) - self.int(0, len(shape)):])
        return ((self.int(2, 3),) if self.chance(0.1) and len(shape) < 4 else ()) + out

    # --- the graph ------------------------------------------------------------------------------
    def name(self, stem: str) -> str:
        self.count += 1
        return f"{stem}{self.count}"

    def input(self, shape: tuple[int, ...], bound: int = 0) -> Value:
        """A graph input: float32, or with a `bound` int64 indices in [-bound, bound) (not one of the values
        that the next nodes pick from)."""
        value = Value(self.name("input"), tuple(shape), T.INT64 if bound else T.FLOAT, exact=True)
        self.inputs.append(value)
        self.bounds[value.name] = bound
        if not bound:
            self.values.append(value)
        return value

    def feeds(self) -> dict[str, np.ndarray]:
        return {v.name: self.rng.integers(-self.bounds[v.name], self.bounds[v.name], v.shape) if self.bounds[v.name]
                else self.rng.standard_normal(v.shape).astype(np.float32) for v in self.inputs}

    def const(self, array: np.ndarray) -> str:
        name = self.name("const")
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weights(self, *shape: int, scale: float = 1.0) -> str:
        return self.const((self.rng.standard_normal(shape) * scale).astype(np.float32))

    def node(self, op: str, inputs: list[str], outputs: int = 1, exact: bool = False, final: bool = False,
             shape: tuple[int, ...] | None = None, **attrs) -> list[Value]:
        """Add the node if ONNX shape inference accepts it and gives every output a small static shape (a `final`
        output: its rank), and return its outputs; else raise Rejected. Where ONNX shape inference loses the
        shape in the body of a function (GroupNormalization's), the generator gives it: `shape`, declared in the
        model for the next nodes' inference."""
        names = [self.name(op.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, names, name=self.name(op), **attrs))
        try:
            inferred = onnx.shape_inference.infer_shapes(self.model(names), strict_mode=True, data_prop=True)
        except Exception:
            inferred = None
        found = {v.name: v.type.tensor_type for v in inferred.graph.output} if inferred else {}
        values = []
        for name in names:
            tt = found.get(name)
            if shape is not None and tt is not None and not tt.HasField("shape"):
                self.declared.add(name)
                tt = helper.make_tensor_type_proto(tt.elem_type or T.FLOAT, shape).tensor_type  # its type lost too
            if tt is None or not tt.HasField("shape") or \
                    not (final or all(d.HasField("dim_value") for d in tt.shape.dim)):
                raise Rejected(f"{op}: no static shape")
            values.append(Value(name, tuple(d.dim_value if d.HasField("dim_value") else 0 for d in tt.shape.dim),
                                tt.elem_type, exact, final))  # a final value's run-time length: 0 here
        if any(not v.final and (min(v.shape, default=1) < 0 or np.prod(v.shape) > MAX_ELEMENTS or
                                np.prod(v.shape) == 0 and self.chance(0.5)) for v in values):
            raise Rejected(f"{op}: a negative dim (ONNX shape inference errs), too large, or empty (kept now and then)")
        self.values += values
        return values

    def attempt(self, generate) -> bool:
        """Run a node generator; when it raises Rejected, undo what it added."""
        sizes = len(self.nodes), len(self.inits), len(self.values), len(self.inputs)
        try:
            generate(self)
            return True
        except Rejected:
            del self.nodes[sizes[0]:], self.inits[sizes[1]:], self.values[sizes[2]:], self.inputs[sizes[3]:]
            return False

    def model(self, outputs: list[str] | list[Value]) -> onnx.ModelProto:
        """The graph with these outputs, declared without shapes: ONNX shape inference and onnxruntime disagree
        on a few (MaxPool and AveragePool with ceil_mode), and onnxruntime is the reference."""
        outs = [helper.make_tensor_value_info(o.name, o.elem, None) if isinstance(o, Value) else
                helper.make_tensor_value_info(o, T.UNDEFINED, None) for o in outputs]
        ins = [helper.make_tensor_value_info(v.name, v.elem, v.shape) for v in self.inputs]
        declared = [helper.make_tensor_value_info(v.name, v.elem, v.shape) for v in self.values
                    if v.name in self.declared]
        graph = helper.make_graph(self.nodes, "fuzz", ins, outs, self.inits, value_info=declared)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)], ir_version=10)
