"""Resize against onnxruntime (tolerance: onnx_ops.TOL, relative 1e-5)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import cglow

from tests.onnx_ops import check, f32, i64, ids, make_model, node_model, rand
from tests.util import cglow_run, ort_run

EMPTY = np.array([], np.float32)


def scales(*values) -> np.ndarray:
    return f32(values)


CASES = [  # id, x shape, roi, scales, sizes, attrs, opset
    ("nearest-default-x2", (1, 2, 3, 4), None, scales(1, 1, 2, 2), None, {}, 13),
    ("nearest-asymmetric-floor-x2", (1, 2, 3, 4), EMPTY, scales(1, 1, 2, 2), None,
     dict(coordinate_transformation_mode="asymmetric", nearest_mode="floor"), 11),
    ("nearest-x3-one-axis", (1, 2, 3, 4), None, scales(1, 1, 1, 3), None, {}, 13),
    ("nearest-down-half-ceil", (1, 2, 6, 8), None, scales(1, 1, 0.5, 0.5), None,
     dict(nearest_mode="round_prefer_ceil"), 13),
    ("nearest-sizes-5to7-floor", (1, 1, 5, 5), None, None, i64(1, 1, 7, 3), dict(nearest_mode="floor"), 13),
    ("nearest-sizes-5to7-ceil", (1, 1, 5, 5), None, None, i64(1, 1, 7, 3), dict(nearest_mode="ceil"), 13),
    ("nearest-sizes-prefer-floor", (1, 1, 5, 4), None, None, i64(1, 1, 8, 6), {}, 13),
    ("nearest-sizes-prefer-ceil-asymmetric", (1, 1, 5, 4), None, None, i64(1, 1, 8, 6),
     dict(nearest_mode="round_prefer_ceil", coordinate_transformation_mode="asymmetric"), 13),
    ("nearest-align-corners", (1, 2, 3, 4), None, None, i64(1, 2, 7, 9),
     dict(coordinate_transformation_mode="align_corners"), 13),
    ("nearest-pytorch-half-pixel", (1, 2, 3, 4), None, scales(1, 1, 2.5, 1.5), None,
     dict(coordinate_transformation_mode="pytorch_half_pixel"), 13),
    ("nearest-batch-channels", (2, 3, 4, 4), None, scales(1, 2, 1, 1), None, {}, 13),
    ("linear-x2", (1, 2, 3, 4), None, scales(1, 1, 2, 2), None, dict(mode="linear"), 13),
    ("linear-sizes", (2, 3, 5, 4), None, None, i64(2, 3, 7, 9), dict(mode="linear"), 13),
    ("linear-down", (1, 2, 8, 7), None, scales(1, 1, 0.5, 0.6), None, dict(mode="linear"), 13),
    ("linear-align-corners", (1, 2, 3, 4), None, None, i64(1, 2, 7, 5),
     dict(mode="linear", coordinate_transformation_mode="align_corners"), 13),
    ("linear-align-corners-scales", (1, 2, 4, 4), None, scales(1, 1, 2, 1.5), None,
     dict(mode="linear", coordinate_transformation_mode="align_corners"), 13),
    ("linear-asymmetric", (1, 2, 3, 4), None, scales(1, 1, 2, 1.5), None,
     dict(mode="linear", coordinate_transformation_mode="asymmetric"), 13),
    ("linear-pytorch-to-1", (1, 2, 5, 4), None, None, i64(1, 2, 1, 6),
     dict(mode="linear", coordinate_transformation_mode="pytorch_half_pixel"), 13),
    ("linear-1d", (2, 3, 5), None, scales(1, 1, 2.4), None, dict(mode="linear"), 13),
    ("linear-3d", (1, 2, 3, 4, 5), None, scales(1, 1, 2, 1.5, 0.8), None, dict(mode="linear"), 13),
    ("linear-all-axes", (2, 3, 4), None, scales(2, 1.5, 0.5), None, dict(mode="linear"), 13),
    ("linear-opset11-sizes", (1, 2, 3, 4), EMPTY, EMPTY, i64(1, 2, 5, 7), dict(mode="linear"), 11),
    ("linear-antialias", (1, 2, 9, 8), None, scales(1, 1, 0.5, 0.4), None, dict(mode="linear", antialias=1), 18),
    ("linear-half-pixel-symmetric", (1, 2, 4, 5), None, scales(1, 1, 1.7, 0.7), None,
     dict(mode="linear", coordinate_transformation_mode="half_pixel_symmetric"), 19),
    ("cubic", (1, 2, 4, 5), None, scales(1, 1, 2, 1.5), None, dict(mode="cubic"), 13),
    ("cubic-down", (1, 2, 8, 9), None, scales(1, 1, 0.5, 0.7), None, dict(mode="cubic"), 13),
    ("cubic-align-corners", (1, 2, 4, 5), None, None, i64(1, 2, 7, 3),
     dict(mode="cubic", coordinate_transformation_mode="align_corners"), 13),
    ("cubic-asymmetric", (1, 2, 4, 5), None, scales(1, 1, 2, 1.5), None,
     dict(mode="cubic", coordinate_transformation_mode="asymmetric"), 13),
    ("cubic-a-exclude-outside", (1, 2, 4, 5), None, scales(1, 1, 1.6, 0.8), None,
     dict(mode="cubic", cubic_coeff_a=-0.5, exclude_outside=1), 13),
    ("cubic-antialias", (1, 2, 9, 8), None, scales(1, 1, 0.6, 0.5), None, dict(mode="cubic", antialias=1), 18),
    ("crop-linear", (1, 2, 5, 6), f32([0, 0, 0.2, 0.3, 1, 1, 0.8, 0.9]), None, i64(1, 2, 4, 4),
     dict(mode="linear", coordinate_transformation_mode="tf_crop_and_resize"), 13),
    ("crop-extrapolate", (1, 2, 5, 6), f32([0, 0, -0.2, 0.4, 1, 1, 1.3, 1.2]), None, i64(1, 2, 6, 4),
     dict(mode="linear", coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=2.5), 13),
    ("crop-nearest-extrapolate", (1, 2, 5, 6), f32([0, 0, -0.2, 0.4, 1, 1, 1.3, 1.2]), None, i64(1, 2, 6, 4),
     dict(coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-1.0), 13),
    ("crop-to-1", (1, 2, 5, 6), f32([0, 0, 0.2, 0.3, 1, 1, 0.8, 0.9]), None, i64(1, 2, 1, 3),
     dict(mode="linear", coordinate_transformation_mode="tf_crop_and_resize"), 13),
    ("axes-scales", (1, 2, 3, 4), None, scales(2, 1.5), None, dict(mode="linear", axes=[3, 2]), 18),
    ("axes-crop", (1, 2, 5, 6), f32([0.2, 0.3, 0.8, 0.9]), None, i64(4, 4),
     dict(mode="linear", axes=[-2, -1], coordinate_transformation_mode="tf_crop_and_resize"), 18),
    ("not-larger", (1, 2, 4, 6), None, None, i64(6, 6), dict(axes=[2, 3], keep_aspect_ratio_policy="not_larger"), 18),
    ("not-smaller", (1, 2, 4, 6), None, None, i64(6, 6),
     dict(mode="linear", axes=[2, 3], keep_aspect_ratio_policy="not_smaller"), 18),
    ("identity", (1, 2, 3, 4), None, scales(1, 1, 1, 1), None, dict(mode="linear"), 13),
]


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_resize(case):
    _, x, roi, sc, sizes, attrs, opset = case
    ins = [("x", x), ("roi", roi), ("scales", sc), ("sizes", sizes)]
    while ins[-1][1] is None:
        ins.pop()
    check(node_model("Resize", ins, opset=opset, **attrs))


def test_resize_tf_half_pixel_for_nearest():
    """Opset 11's tf_half_pixel_for_nearest, which neither onnxruntime nor the ONNX reference implements:
    x_original = (x_resized + 0.5) / scale, rounded half down, against NumPy."""
    model = node_model("Resize", [("x", (1, 2, 3, 4)), ("roi", EMPTY), ("scales", scales(1, 1, 2, 1.5))], opset=11,
                       coordinate_transformation_mode="tf_half_pixel_for_nearest")
    x = rand(1, 2, 3, 4, seed=4)
    rows, cols = (np.clip(np.ceil((np.arange(n * s) + 0.5) / s - 0.5), 0, n - 1).astype(int)
                  for n, s in ((3, 2), (4, 1.5)))
    (got,) = cglow_run(model, {"x": x})
    assert np.array_equal(got, x[:, :, rows][:, :, :, cols])


@pytest.mark.parametrize("x, factors, attrs", [
    ((1, 3, 8, 8), (1, 1, 2, 2), {}),
    ((1, 2, 6, 5), (1, 1, 1.5, 0.6), {}),
    ((1, 2, 3, 4), (1, 1, 2, 1.5), dict(coordinate_transformation_mode="align_corners")),
    ((1, 2, 3, 4), (1, 1, 2, 1.5), dict(coordinate_transformation_mode="asymmetric")),
    ((1, 2, 4, 6), (1, 1, 1, 1.5), {}),
    ((3, 4), (2, 1.5), {}),
])
def test_linear_resize_is_onnxruntime_to_the_bit(x, factors, attrs):
    """A linear resize over the last two axes evaluates onnxruntime's formula in its order and rounding (taps
    from float32 coordinates, weights multiplied first, four terms summed from the top left): the same
    float32 values, so a quantized model's QuantizeLinear after it rounds its ties alike (unet's decoder)."""
    model = node_model("Resize", [("x", x), ("roi", None), ("scales", scales(*factors))], mode="linear", **attrs)
    value = rand(*x, seed=3)
    (got,) = cglow_run(model, {"x": value})
    (want,) = ort_run(model, {"x": value})
    assert np.array_equal(got, want)


def instr_types(model) -> set[str]:
    return {type(i).__name__ for i in cglow.compile_model(model).program.instrs}


def test_resize_transposed_input():
    """A transposed input whose dims after the first resized axis do not merge, resized by a matrix without
    a short period (2 -> 37 rows): copied to row-major, then a Gemm."""
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 1, 3, 2]),
             helper.make_node("Resize", ["t", "", "", "s"], ["y"], mode="linear")]
    model = make_model(nodes, {"x": (1, 3, 4, 2)}, ["y"], {"s": i64(1, 3, 37, 2)})
    check(model)
    assert "Gemm" in instr_types(model)


@pytest.mark.parametrize("mode, size", [("linear", 16), ("cubic", 16), ("linear", 12)])
def test_resize_with_a_period_is_maps_of_its_taps(mode, size):
    """x2 and x1.5 (period 3 rows for 2 inputs): weighted sums of 2 or 4 taps through strided views, edge rows
    apart (clamped taps), no Gemm; a channels-last input (after a Conv) stays channels last."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Resize", ["c", "", "", "s"], ["y"], mode=mode)]
    model = make_model(nodes, {"x": (1, 3, 8, 8)}, ["y"], {"w": rand(4, 3, 3, 3, seed=1), "s": i64(1, 4, size, size)})
    check(model)
    assert "Gemm" not in instr_types(model)


def test_resize_then_conv():
    """Nearest x2 upsampling feeding a convolution (a decoder block)."""
    nodes = [helper.make_node("Resize", ["x", "", "s"], ["u"], mode="nearest"),
             helper.make_node("Conv", ["u", "w"], ["y"], pads=[1, 1, 1, 1])]
    check(make_model(nodes, {"x": (1, 2, 3, 3)}, ["y"], {"s": scales(1, 1, 2, 2), "w": rand(3, 2, 3, 3, seed=2)}))


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_align_corners_divides_by_the_fractional_length(mode):
    """Given scales, align_corners divides by scale x input length less one, fractional or not, as the ONNX
    reference does (onnx/onnx#2462; onnxruntime takes the output's integer length): 5 x 0.7 = 3.5, not 3."""
    model = node_model("Resize", [("x", (1, 2, 5, 4)), ("roi", None), ("scales", scales(1, 1, 0.7, 1.3))], mode=mode,
                       coordinate_transformation_mode="align_corners")
    x = rand(1, 2, 5, 4, seed=5)
    (got,) = cglow_run(model, {"x": x})
    np.testing.assert_allclose(got, ReferenceEvaluator(model).run(None, {"x": x})[0], rtol=1e-5, atol=1e-6)
