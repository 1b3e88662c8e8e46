"""Ops compiled as cglow's decompositions into gathers (cglow/graph/sampling.py), against the ONNX reference
evaluator on random data: GridSample in every mode, padding and alignment, 2-D and 3-D, with grid points far
outside the input (reflected more than once)."""
from __future__ import annotations

import itertools

import numpy as np
from onnx import TensorProto as T, helper as h
from onnx.reference import ReferenceEvaluator
import pytest

import cglow
from cglow.errors import CglowError
from cglow.tools import backend

RNG = np.random.default_rng(11)


def model_of(op: str, inputs: dict, out_shape, opset: int = 22, **attrs):
    """One node of `op` over graph inputs {name: (element type, shape)}, its float output 'y'."""
    graph = h.make_graph([h.make_node(op, list(inputs), ["y"], **attrs)], op.lower(),
                         [h.make_tensor_value_info(k, t, s) for k, (t, s) in inputs.items()],
                         [h.make_tensor_value_info("y", T.FLOAT, out_shape)])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def agrees(model, feeds: list[np.ndarray], tol: float = 1e-5) -> None:
    want = ReferenceEvaluator(model).run(None, dict(zip([i.name for i in model.graph.input], feeds)))[0]
    got = backend.prepare(model).run(feeds)[0]
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("mode, padding, align", list(itertools.product(
    ["nearest", "linear", "cubic"], ["zeros", "border", "reflection"], [0, 1])))
def test_grid_sample_2d(mode, padding, align):
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    grid = RNG.uniform(-3.2, 3.2, (2, 6, 7, 2)).astype(np.float32)
    model = model_of("GridSample", {"x": (T.FLOAT, x.shape), "grid": (T.FLOAT, grid.shape)}, (2, 3, 6, 7),
                     mode=mode, padding_mode=padding, align_corners=align)
    agrees(model, [x, grid])


@pytest.mark.parametrize("mode, padding, align", list(itertools.product(
    ["nearest", "linear"], ["zeros", "border", "reflection"], [0, 1])))
def test_grid_sample_3d(mode, padding, align):
    x = RNG.standard_normal((1, 2, 3, 4, 5)).astype(np.float32)
    grid = RNG.uniform(-2.5, 2.5, (1, 2, 3, 4, 3)).astype(np.float32)
    model = model_of("GridSample", {"x": (T.FLOAT, x.shape), "grid": (T.FLOAT, grid.shape)}, (1, 2, 2, 3, 4),
                     mode=mode, padding_mode=padding, align_corners=align)
    agrees(model, [x, grid])


def test_grid_sample_opset_16_names():
    """Opset 16 spells the modes bilinear and bicubic (and knows 2-D inputs only): opset 22's linear and cubic."""
    x = RNG.standard_normal((1, 2, 3, 4)).astype(np.float32)
    grid = RNG.uniform(-2, 2, (1, 3, 3, 2)).astype(np.float32)
    inputs = {"x": (T.FLOAT, x.shape), "grid": (T.FLOAT, grid.shape)}
    for old, new in (("bilinear", "linear"), ("bicubic", "cubic")):
        model = model_of("GridSample", inputs, (1, 2, 3, 3), opset=16, mode=old, padding_mode="reflection")
        want = ReferenceEvaluator(model_of("GridSample", inputs, (1, 2, 3, 3), mode=new, padding_mode="reflection"))
        np.testing.assert_allclose(backend.prepare(model).run([x, grid])[0],
                                   want.run(None, {"x": x, "grid": grid})[0], rtol=1e-5, atol=1e-5)


def test_grid_sample_cubic_3d_is_refused():
    model = model_of("GridSample", {"x": (T.FLOAT, (1, 1, 2, 2, 2)), "grid": (T.FLOAT, (1, 2, 2, 2, 3))},
                     (1, 1, 2, 2, 2), mode="cubic")
    with pytest.raises(CglowError, match="cubic mode is defined for 2-D inputs only"):
        cglow.compile_model(model)
