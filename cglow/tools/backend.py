"""The standard ONNX backend interface over cglow: compile to C, build on the host, run through cffi.

cglow's C is static. Inputs that only say *how* to compute (Reshape's shape, Slice's starts, Pad's
pads, Resize's scales, Reduce axes, TopK's k...) are folded into the model as constants at the first
`run`; the model is compiled again if their values change. Data inputs stay inputs of the C function,
and their shapes are pinned to the arrays given; they and the outputs keep the model's element types (a quantized
model's float inputs are not made 8-bit: `--float-io`).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.backend.base import Backend, BackendRep

from ..compiler import compile_model
from ..graph import decompose, functions, unroll
from ..graph.evaluate_node import outer_names
from ..graph.registry import OPS
from ..options import Options
from .host import HostModel, build

UPGRADED = {"Upsample": (1,)}  # shape inputs of ops the import upgrades into others (Upsample's scales: Resize's)
REWRITTEN = {**UPGRADED, **decompose.SHAPE_INPUTS, **functions.SHAPE_INPUTS, **unroll.SHAPE_INPUTS}


# inputs of which an op reads the type or shape only, not the values: every one of Shape's, Size's and EyeLike's,
# CastLike's second
TYPE_ONLY = {"Shape": (0,), "Size": (0,), "EyeLike": (0,), "CastLike": (1,)}


def shape_inputs(model: onnx.ModelProto) -> set[str]:
    """The graph inputs whose values reach a shape-like operand of some node (OpSpec.shape_inputs, or REWRITTEN for
    the ops the import rewrites: a Loop's trip count and condition among them, which say how many copies of its body
    it becomes), directly or through other nodes (an `_expanded` function body computing a Range's limit from an
    input), not through the inputs whose type or shape alone an op reads (TYPE_ONLY: Shape's...)."""
    inputs = {v.name for v in model.graph.input} - {t.name for t in model.graph.initializer}
    found: set[str] = set()
    _follow(model.graph, {name: {name} for name in inputs}, found)
    return found


def _follow(graph: onnx.GraphProto, sources: dict[str, set[str]], found: set[str]) -> dict[str, set[str]]:
    """`sources` with the graph inputs each value of `graph` derives from; those that reach a shape-like operand
    added to `found`. An If's outputs derive from its condition and its branches' outputs; the outputs of another
    node with subgraphs (a Loop's, a Scan's) from everything it reads, and so do its bodies' inputs."""
    sources = dict(sources)
    for node in graph.node:
        spec = OPS.get(node.op_type)
        for i in spec.shape_inputs if spec else REWRITTEN.get(node.op_type, ()):
            if i < len(node.input):
                found |= sources.get(node.input[i], set())
        bodies = [helper.get_attribute_value(a) for a in node.attribute if a.type == onnx.AttributeProto.GRAPH]
        if node.op_type == "If":
            outs = [set(sources.get(node.input[0], set())) for _ in node.output]
            for branch in bodies:
                inner = _follow(branch, sources, found)
                for out, value in zip(outs, branch.output):
                    out |= inner.get(value.name, set())
        else:
            skipped = TYPE_ONLY.get(node.op_type, ())
            reads = [x for i, x in enumerate(node.input) if i not in skipped] + sorted(outer_names(bodies))
            derived = set().union(*(sources.get(x, set()) for x in reads))
            for body in bodies:
                _follow(body, {**sources, **_body_inputs(node, body, sources, derived)}, found)
            outs = [derived for _ in node.output]
        sources.update(zip(node.output, outs))
    return sources


def _body_inputs(node: onnx.NodeProto, body: onnx.GraphProto, sources: dict[str, set[str]],
                 derived: set[str]) -> dict[str, set[str]]:
    """What a Loop's or Scan's body inputs derive from: each from the node's input in its place (a Loop's iteration
    number from the trip count, its condition from the condition; a Scan-8's after its sequence lengths), and the
    values carried from one iteration to the next from whatever the body reads as well."""
    shift = 1 if node.op_type == "Scan" and len(body.input) < len(node.input) else 0
    carried = set().union(*(sources.get(x, set()) for x in outer_names([body])))
    found = {}
    for k, v in enumerate(body.input):
        given = node.input[k + shift] if k + shift < len(node.input) else ""
        first = sources.get(given, set())
        found[v.name] = first | carried if node.op_type == "Loop" and k >= 2 or node.op_type == "Scan" else first
    return found if node.op_type in ("Loop", "Scan") else {v.name: derived for v in body.input}


def specialize(model: onnx.ModelProto, values: dict[str, np.ndarray]) -> onnx.ModelProto:
    """The model with the given graph inputs turned into initializers holding those values."""
    special = onnx.ModelProto()
    special.CopyFrom(model)
    kept = [v for v in special.graph.input if v.name not in values]
    del special.graph.input[:]
    special.graph.input.extend(kept)
    special.graph.initializer.extend(numpy_helper.from_array(np.asarray(v), n) for n, v in values.items())
    return special


class CglowRep(BackendRep):
    def __init__(self, model: onnx.ModelProto, name: str = "net"):
        self.model = model
        self.name = name
        initializers = {t.name for t in model.graph.initializer}
        self.input_names = [v.name for v in model.graph.input if v.name not in initializers]
        self.folded = shape_inputs(model)
        self.hosts: dict[Any, HostModel] = {}

    def host(self, feeds: dict[str, np.ndarray]) -> HostModel:
        folded = {n: feeds[n] for n in self.input_names if n in self.folded}
        data = {n: feeds[n] for n in self.input_names if n not in self.folded}
        key = tuple((n, a.dtype.str, a.shape, a.tobytes()) for n, a in folded.items()) + \
            tuple((n, a.shape) for n, a in data.items())
        if key not in self.hosts:
            model = specialize(self.model, folded) if folded else self.model
            compiled = compile_model(model, self.name, shapes={n: a.shape for n, a in data.items()},
                                     options=Options(float_io=True))  # the model's own input and output types
            self.hosts[key] = build(compiled)
        return self.hosts[key]

    def run(self, inputs, **kwargs) -> tuple[np.ndarray, ...]:
        if isinstance(inputs, dict):
            feeds = {n: np.asarray(inputs[n]) for n in self.input_names}
        else:
            inputs = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
            feeds = {n: np.asarray(x) for n, x in zip(self.input_names, inputs)}
        host = self.host(feeds)
        arrays = [np.asarray(feeds[t.name], dtype=t.dtype, order="C") for t in host.compiled.inputs]
        return tuple(host(*arrays))


class CglowBackend(Backend):
    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs) -> CglowRep:
        super().prepare(model, device, **kwargs)
        return CglowRep(model)

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs, device: str = "CPU", **kwargs) -> tuple[np.ndarray, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device.upper() == "CPU"


prepare = CglowBackend.prepare
run_model = CglowBackend.run_model
supports_device = CglowBackend.supports_device
