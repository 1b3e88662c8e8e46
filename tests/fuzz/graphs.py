"""Random valid ONNX graphs from the ops cglow supports, NNSmith-style: random shapes, broadcasting,
attributes, branches and skip connections, attention blocks, 3-D layers, vision and signal ops, 2 to 8 generated
steps on small tensors. Graph `index` of `seed` depends on nothing else, so any one can be rebuilt alone
(`attempt` draws another one in its place when onnxruntime cannot run it)."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T

from . import attention, control_flow, elementwise, integers, layers, signal, tensors, vision, volumetric
from .builder import OPSET, Builder

GENERATORS = elementwise.GENERATORS + integers.GENERATORS + layers.GENERATORS + tensors.GENERATORS + \
    attention.GENERATORS + control_flow.GENERATORS + vision.GENERATORS + volumetric.GENERATORS + signal.GENERATORS


def random_graph(seed: int, index: int, attempt: int = 0, generators=GENERATORS,
                 opset: int = OPSET) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The graph (of these `generators`, at this `opset`) and seeded normal float32 values for its inputs."""
    rng = np.random.default_rng([seed, index, attempt])
    b = Builder(rng, opset)
    rank = b.choice([1, 2, 3, 4, 4, 4])
    shape = tuple(b.int(1, 8 if rank == 4 and axis >= 2 else 5) for axis in range(rank))
    b.input(shape)
    if b.chance(0.3):
        b.input(b.broadcast_shape(shape))
    weights = np.array([w for _, w in generators], float)
    generators = [g for g, _ in generators]
    steps, target = 0, b.int(2, 8)
    for _ in range(100):
        if steps == target:
            break
        steps += b.attempt(generators[int(rng.choice(len(generators), p=weights / weights.sum()))])
    if steps == 0:
        b.node("Relu", [b.inputs[0].name])
    consumed = {name for node in b.nodes for name in node.input}
    # the outputs: the last value, some values nothing reads (branches), the final ones; an index computed
    # inexactly is noise
    results = [v for v in b.values if v not in b.inputs and (v.elem == T.FLOAT or v.exact) and not v.final]
    outputs = [v for v in results[:-1] if v.name not in consumed and b.chance(0.5)][:2] + results[-1:] + \
        [v for v in b.values if v.final]  # of a length known at run time only: always outputs, read by no node
    return b.model(outputs), b.feeds()
