"""The standard ONNX backend interface over cglow: compile to C, build on the host, run through cffi.

cglow's C is static. Inputs that only say *how* to compute (Reshape's shape, Slice's starts, Pad's
pads, Resize's scales, Reduce axes, TopK's k...) are folded into the model as constants at the first
`run`; the model is compiled again if their values change. Data inputs stay inputs of the C function,
and their shapes are pinned to the arrays given.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.base import Backend, BackendRep

from ..compiler import compile_model
from ..graph import decompose, functions, unroll
from ..graph.registry import OPS
from .host import HostModel, build

UPGRADED = {"Upsample": (1,)}  # shape inputs of ops the import upgrades into others (Upsample's scales: Resize's)
REWRITTEN = {**UPGRADED, **decompose.SHAPE_INPUTS, **functions.SHAPE_INPUTS, **unroll.SHAPE_INPUTS}


def shape_inputs(model: onnx.ModelProto) -> set[str]:
    """The graph inputs that feed a shape-like operand of some node (OpSpec.shape_inputs, or REWRITTEN for the ops
    the import rewrites), and those that a Loop's trip count or condition is computed from (unrolled, it is as many
    copies of its body as they say)."""
    inputs = {v.name for v in model.graph.input} - {t.name for t in model.graph.initializer}
    found, counts = set(), []
    for node in model.graph.node:
        spec = OPS.get(node.op_type)
        for i in spec.shape_inputs if spec else REWRITTEN.get(node.op_type, ()):
            if i < len(node.input) and node.input[i] in inputs:
                found.add(node.input[i])
            if i < len(node.input) and node.op_type == "Loop":
                counts.append(node.input[i])
    return found | (_computed_from(model.graph, counts) & inputs)


def _computed_from(graph: onnx.GraphProto, values: list[str]) -> set[str]:
    """The values whose values the given ones are computed from, these included (through the nodes that read
    values: not through Shape and Size, which read types)."""
    producer = {o: n for n in graph.node for o in n.output if o}
    seen: set[str] = set()
    while values:
        name = values.pop()
        if name and name not in seen:
            seen.add(name)
            node = producer.get(name)
            values += list(node.input) if node is not None and node.op_type not in ("Shape", "Size") else []
    return seen


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
            compiled = compile_model(model, self.name, shapes={n: a.shape for n, a in data.items()})
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
