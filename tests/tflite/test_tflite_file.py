"""tests/tflite_file.py writes .tflite files that LiteRT loads and runs as meant."""
from __future__ import annotations

import numpy as np

from tests.util import need_module

need_module("ai_edge_litert")

from tests.tflite_file import TFLiteWriter, options_table, run_litert

RNG = np.random.default_rng(0)


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def conv_nhwc_same(x, w, b):
    """Stride-1 SAME convolution, x NHWC, w OHWI."""
    kh, kw = w.shape[1:3]
    xp = np.pad(x, [(0, 0), ((kh - 1) // 2, kh // 2), ((kw - 1) // 2, kw // 2), (0, 0)])
    n, h, wd, _ = x.shape
    out = np.zeros((n, h, wd, w.shape[0]), np.float64)
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nhwc,oc->nhwo", xp[:, i:i + h, j:j + wd], w[:, i, j])
    return (out + b).astype(np.float32)


def test_options_tables():
    assert options_table("DEPTHWISE_CONV_2D") == "DepthwiseConv2DOptions"
    assert options_table("MAX_POOL_2D") == "Pool2DOptions"
    assert options_table("MEAN") == "ReducerOptions"
    assert options_table("BATCH_TO_SPACE_ND") == "BatchToSpaceNDOptions"


def test_conv2d_float():
    x, w, b = randn(1, 8, 8, 3), randn(4, 3, 3, 3), randn(4)
    t = TFLiteWriter()
    ti, tw, tb, to = (t.tensor("x", x.shape, np.float32), t.tensor("w", w.shape, np.float32, w),
                      t.tensor("b", b.shape, np.float32, b), t.tensor("y", (1, 8, 8, 4), np.float32))
    t.op("CONV_2D", [ti, tw, tb], [to],
         {"padding": "SAME", "stride_w": 1, "stride_h": 1, "fused_activation_function": "RELU"})
    (y,) = run_litert(t.build([ti], [to]), [x])
    np.testing.assert_allclose(y, np.maximum(conv_nhwc_same(x, w, b), 0), atol=1e-5)


def test_fully_connected_float():
    x, w, b = randn(2, 5), randn(3, 5), randn(3)
    t = TFLiteWriter()
    ti, tw, tb, to = (t.tensor("x", x.shape, np.float32), t.tensor("w", w.shape, np.float32, w),
                      t.tensor("b", b.shape, np.float32, b), t.tensor("y", (2, 3), np.float32))
    t.op("FULLY_CONNECTED", [ti, tw, tb], [to], {"fused_activation_function": "NONE"})
    (y,) = run_litert(t.build([ti], [to]), [x])
    np.testing.assert_allclose(y, x @ w.T + b, atol=1e-5)


def test_conv2d_int8_per_channel():
    in_scale, w_scales = 0.05, np.array([0.01, 0.02, 0.015, 0.03], np.float32)
    w = RNG.integers(-127, 128, (4, 3, 3, 3), dtype=np.int8)
    bias = RNG.integers(-500, 500, 4, dtype=np.int32)
    t = TFLiteWriter()
    ti = t.tensor("x", (1, 8, 8, 3), np.int8, scale=in_scale, zero_point=-3)
    tw = t.tensor("w", w.shape, np.int8, w, scale=w_scales, axis=0)
    tb = t.tensor("b", bias.shape, np.int32, bias, scale=in_scale * w_scales)
    to = t.tensor("y", (1, 8, 8, 4), np.int8, scale=0.1, zero_point=5)
    t.op("CONV_2D", [ti, tw, tb], [to], {"padding": "SAME", "stride_w": 1, "stride_h": 1})
    x = RNG.integers(-128, 128, (1, 8, 8, 3), dtype=np.int8)
    (y,) = run_litert(t.build([ti], [to]), [x])
    assert y.dtype == np.int8 and y.shape == (1, 8, 8, 4)
    real = conv_nhwc_same((x.astype(np.float32) + 3) * in_scale, w * w_scales[:, None, None, None],
                          bias * in_scale * w_scales)
    np.testing.assert_allclose((y.astype(np.float32) - 5) * 0.1, np.clip(real, -13.3, 12.2), atol=0.1 + 1e-6)


def test_reshape_new_shape_option():
    x = randn(2, 3, 4)
    t = TFLiteWriter()
    ti, to = t.tensor("x", x.shape, np.float32), t.tensor("y", (6, 4), np.float32)
    t.op("RESHAPE", [ti], [to], {"new_shape": [6, 4]})
    (y,) = run_litert(t.build([ti], [to]), [x])
    np.testing.assert_array_equal(y, x.reshape(6, 4))


def test_add_relu6():
    a, b = randn(1, 4, 4, 2) * 5, randn(1, 4, 4, 2) * 5
    t = TFLiteWriter()
    ta, tb, to = (t.tensor(n, a.shape, np.float32) for n in ("a", "b", "y"))
    t.op("ADD", [ta, tb], [to], {"fused_activation_function": "RELU6"})
    y = run_litert(t.build([ta, tb], [to]), [a, b])[0]
    np.testing.assert_allclose(y, np.clip(a + b, 0, 6), atol=1e-6)
