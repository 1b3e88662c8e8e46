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
from onnx import helper, numpy_helper
from onnx.backend.base import Backend, BackendRep

from ..compiler import compile_model
from ..graph import decompose, functions
from ..graph.evaluate_node import outer_names
from ..graph.registry import OPS
from .host import HostModel, build

UPGRADED = {"Upsample": (1,)}  # shape inputs of ops the import upgrades into others (Upsample's scales: Resize's)


SHAPE_ONLY = ("Shape", "Size")  # ops whose output depends on their input's shape, not on its values


def shape_inputs(model: onnx.ModelProto) -> set[str]:
    """The graph inputs whose values reach a shape-like operand of some node (OpSpec.shape_inputs), directly or
    through other nodes (an `_expanded` function body computing a Range's limit from an input, an If's branch
    reading it), not through Shape or Size."""
    inputs = {v.name for v in model.graph.input} - {t.name for t in model.graph.initializer}
    sources: dict[str, set[str]] = {name: {name} for name in inputs}  # value -> the graph inputs it derives from
    shape_like = {**decompose.SHAPE_INPUTS, **functions.SHAPE_INPUTS, **UPGRADED}
    found = set()
    for node in model.graph.node:
        spec = OPS.get(node.op_type)
        for i in spec.shape_inputs if spec else shape_like.get(node.op_type, ()):
            if i < len(node.input):
                found |= sources.get(node.input[i], set())
        reads = list(node.input) + sorted(outer_names(helper.get_attribute_value(a) for a in node.attribute
                                                      if a.type == onnx.AttributeProto.GRAPH))
        derived = set() if node.op_type in SHAPE_ONLY else set().union(*(sources.get(x, set()) for x in reads))
        for out in node.output:
            sources[out] = derived
    return found


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
