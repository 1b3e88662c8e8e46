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

from tests.util import ort_run

RNG = np.random.default_rng(11)


def model_of(op: str, inputs: dict, out_shape, opset: int = 22, **attrs):
    """One node of `op` over graph inputs {name: (element type, shape)}, its float output 'y'."""
    graph = h.make_graph([h.make_node(op, list(inputs), ["y"], **attrs)], op.lower(),
                         [h.make_tensor_value_info(k, t, s) for k, (t, s) in inputs.items()],
                         [h.make_tensor_value_info("y", T.FLOAT, out_shape)])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def agrees(model, feeds: list[np.ndarray], tol: float = 1e-5, reference: bool = True) -> None:
    """Against onnx's reference evaluator, or onnxruntime."""
    named = dict(zip([i.name for i in model.graph.input], feeds))
    want = (ReferenceEvaluator(model).run(None, named) if reference else ort_run(model, named))[0]
    got = backend.prepare(model).run(feeds)[0]
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("mode, padding, align", list(itertools.product(
    ["nearest", "linear", "cubic"], ["zeros", "border", "reflection"], [0, 1])))
def test_grid_sample_2d(mode, padding, align):
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    grid = RNG.uniform(-3.2, 3.2, (2, 6, 7, 2)).astype(np.float32)
    model = model_of("GridSample", {"x": (T.FLOAT, x.shape), "grid": (T.FLOAT, grid.shape)}, (2, 3, 6, 7),
                     mode=mode, padding_mode=padding, align_corners=align)
    # cubic border padding clamps each neighbour, as onnxruntime and PyTorch do (onnx's reference clamps the
    # coordinate first; no conformance case has it)
    agrees(model, [x, grid], reference=(mode, padding) != ("cubic", "border"))


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


def roi_boxes(count: int, height: int, width: int) -> np.ndarray:
    """Boxes (x1, y1, x2, y2) of every kind: inside, across the borders, far outside, and inverted (x2 < x1)."""
    corners = RNG.uniform(-4, max(height, width) + 4, (count, 4)).astype(np.float32)
    corners[0] = (1, 1, width - 2, height - 2)
    corners[1] = (width - 1.2, height - 1.5, width + 0.5, height + 0.3)
    return corners


@pytest.mark.parametrize("mode, transform, opset, scale", [
    ("avg", "half_pixel", 22, 1.0), ("avg", "output_half_pixel", 22, 0.5), ("max", "half_pixel", 16, 1.0),
    ("max", "output_half_pixel", 22, 0.25), ("avg", None, 10, 1.0), ("max", None, 10, 0.5)])
def test_roi_align(mode, transform, opset, scale):
    """Opset 10 has no coordinate_transformation_mode: its boxes are output_half_pixel's (the reference evaluator
    knows only the later default, so opset 10 is compared with output_half_pixel at opset 16)."""
    x = RNG.standard_normal((2, 3, 7, 9)).astype(np.float32)
    rois = roi_boxes(6, int(7 / scale), int(9 / scale))
    batch = np.array([0, 1, 1, 0, 1, 0], np.int64)
    inputs = {"x": (T.FLOAT, x.shape), "rois": (T.FLOAT, rois.shape), "batch": (T.INT64, batch.shape)}
    attrs = dict(mode=mode, output_height=3, output_width=4, sampling_ratio=2, spatial_scale=scale)
    model = model_of("RoiAlign", inputs, (6, 3, 3, 4), opset=opset, **attrs,
                     **({"coordinate_transformation_mode": transform} if transform else {}))
    reference = model_of("RoiAlign", inputs, (6, 3, 3, 4), opset=16, **attrs,
                         coordinate_transformation_mode=transform or "output_half_pixel")
    want = ReferenceEvaluator(reference).run(None, {"x": x, "rois": rois, "batch": batch})[0]
    np.testing.assert_allclose(backend.prepare(model).run([x, rois, batch])[0], want, rtol=1e-5, atol=1e-5)


def test_roi_align_adaptive_sampling_is_refused():
    model = model_of("RoiAlign", {"x": (T.FLOAT, (1, 1, 4, 4)), "rois": (T.FLOAT, (2, 4)),
                                  "batch": (T.INT64, (2,))}, (2, 1, 1, 1))
    with pytest.raises(CglowError, match="sampling_ratio 0 .* is not supported"):
        cglow.compile_model(model)


@pytest.mark.parametrize("group, offset_group, strides, dilations, pads, bias, mask", [
    (1, 1, (1, 1), (1, 1), (0, 0, 0, 0), False, False),
    (2, 1, (2, 1), (1, 2), (1, 0, 2, 1), True, False),
    (1, 2, (1, 2), (2, 1), (1, 1, 1, 1), False, True),
    (2, 2, (1, 1), (1, 1), (2, 1, 0, 1), True, True)])
def test_deform_conv(group, offset_group, strides, dilations, pads, bias, mask):
    """Offsets of a few pixels, so that taps fall outside the input (zeros) and between its pixels."""
    n, c, m, (height, width), (kh, kw) = 2, 4, 6, (5, 6), (2, 3)
    out = [(size + pads[a] + pads[a + 2] - (k - 1) * dilations[a] - 1) // strides[a] + 1
           for a, (size, k) in enumerate(((height, kh), (width, kw)))]
    feeds = {"x": RNG.standard_normal((n, c, height, width)), "w": RNG.standard_normal((m, c // group, kh, kw)),
             "offset": RNG.uniform(-2.5, 2.5, (n, 2 * offset_group * kh * kw, *out)),
             "b": RNG.standard_normal(m) if bias else None,
             "mask": RNG.uniform(0, 1, (n, offset_group * kh * kw, *out)) if mask else None}
    feeds = {k: v.astype(np.float32) for k, v in feeds.items() if v is not None}
    names = ["x", "w", "offset", "b" if bias else "", "mask" if mask else ""]
    graph = h.make_graph([h.make_node("DeformConv", names, ["y"], group=group, offset_group=offset_group,
                                      strides=strides, dilations=dilations, pads=pads, kernel_shape=(kh, kw))],
                         "deform", [h.make_tensor_value_info(k, T.FLOAT, v.shape) for k, v in feeds.items()],
                         [h.make_tensor_value_info("y", T.FLOAT, (n, m, *out))])
    agrees(h.make_model(graph, opset_imports=[h.make_opsetid("", 22)]), list(feeds.values()), tol=1e-4)


def test_deform_conv_1d_is_refused():
    model = model_of("DeformConv", {"x": (T.FLOAT, (1, 2, 5)), "w": (T.FLOAT, (3, 2, 2)),
                                    "offset": (T.FLOAT, (1, 2, 4))}, (1, 3, 4))
    with pytest.raises(CglowError, match="2-D convolution .* is supported, not input rank 3"):
        cglow.compile_model(model)
