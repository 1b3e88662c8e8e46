"""Float .tflite layers with int8 weights (dynamic range quantization) or float16 ones, against LiteRT's reference
kernels: cglow quantizes the input at run time as LiteRT does and scales back in its order, so its results are
LiteRT's to the bit; the int8 weights stay int8 in flash, float16 ones become float32 at compile time."""
from __future__ import annotations

import numpy as np
import pytest

from tests.util import need_module, need_target

need_module("ai_edge_litert")

import cglow
from cglow.tools import cross, host
from cglow.compiler import import_graph
from cglow.errors import CglowError
from cglow.graph.passes import PIPELINE
from cglow.options import Options
from tests.tflite_file import TFLiteWriter, run_litert

F32 = np.float32


def _weights(w: TFLiteWriter, rng, shape, channels: int | None, axis: int = 0) -> int:
    """int8 weights with one scale (channels None) or one per channel along axis."""
    scales = rng.uniform(0.002, 0.02, channels or 1).astype(F32)
    return w.tensor("w", shape, np.int8, rng.integers(-127, 128, shape).astype(np.int8), scale=list(scales),
                    zero_point=[0] * scales.size, axis=axis)


def _compiled(model: bytes, tmp_path) -> cglow.CompiledModel:
    path = tmp_path / "model.tflite"
    path.write_bytes(model)
    return cglow.compile_model(path)


def _same_as_litert(model: bytes, x: np.ndarray, tmp_path) -> None:
    (expected,) = run_litert(model, [x])
    (got,) = host.build(_compiled(model, tmp_path)).run(x)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


def _dense_model(rng, rows: int, k: int, n: int, channels: int | None, asymmetric: bool, int8: bool = True,
                 act: str = "NONE") -> bytes:
    w = TFLiteWriter()
    x = w.tensor("x", [rows, k], F32)
    weights = _weights(w, rng, [n, k], channels) if int8 else \
        w.tensor("w", [n, k], F32, rng.standard_normal((n, k)).astype(F32))
    b = w.tensor("b", [n], F32, rng.standard_normal(n).astype(F32))
    y = w.tensor("y", [rows, n], F32)
    w.op("FULLY_CONNECTED", [x, weights, b], [y], {"asymmetric_quantize_inputs": asymmetric,
                                                   "fused_activation_function": act})
    return w.build([x], [y])


@pytest.mark.parametrize("asymmetric", [False, True], ids=["symmetric", "asymmetric"])
@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
def test_dense(per_channel, asymmetric, tmp_path):
    """Rows quantized one by one: a row of zeros, an all-positive one, an all-negative one, mixed ones."""
    rng = np.random.default_rng(int(per_channel) * 2 + int(asymmetric))
    model = _dense_model(rng, 6, 37, 11, 11 if per_channel else None, asymmetric, act="RELU6")
    x = (rng.standard_normal((6, 37)) * 3).astype(F32)
    x[0], x[1], x[2] = 0, np.abs(x[1]) + 0.5, -np.abs(x[2])
    _same_as_litert(model, x, tmp_path)


def test_dense_rounds_before_the_zero_point(tmp_path):
    """A row over [-3, 1]: scale 4 / 255, zero point 63. Its value 0.18039215 times the inverse scale is
    11.499999, which rounds to 11 before the zero point is added (74); added first in float, 74.5 would round
    to 75."""
    rng = np.random.default_rng(10)
    model = _dense_model(rng, 1, 16, 5, 5, True)
    x = rng.uniform(-2.5, 0.5, (1, 16)).astype(F32)
    x[0, :3] = -3.0, 1.0, 0.18039215
    _same_as_litert(model, x, tmp_path)


CONVS = [  # kernel, stride, dilation, padding, per-channel scales
    pytest.param(3, 2, 1, "SAME", False, id="3x3-s2-same-per_tensor"),
    pytest.param(3, 1, 2, "SAME", True, id="3x3-d2-same-per_channel"),
    pytest.param(3, 2, 1, "VALID", True, id="3x3-s2-valid-per_channel"),
    pytest.param(1, 1, 1, "VALID", True, id="1x1-per_channel"),
]


@pytest.mark.parametrize("kernel,stride,dilation,padding,per_channel", CONVS)
def test_conv_2d(kernel, stride, dilation, padding, per_channel, tmp_path):
    """Per-tensor scales: each image quantized symmetrically; per-channel ones: asymmetrically, its padding at the
    zero point."""
    rng = np.random.default_rng(kernel + stride + dilation)
    w = TFLiteWriter()
    x = w.tensor("x", [2, 9, 8, 5], F32)
    weights = _weights(w, rng, [7, kernel, kernel, 5], 7 if per_channel else None)
    b = w.tensor("b", [7], F32, rng.standard_normal(7).astype(F32))
    span = (kernel - 1) * dilation + 1
    out = [-(-n // stride) if padding == "SAME" else (n - span) // stride + 1 for n in (9, 8)]
    y = w.tensor("y", [2, *out, 7], F32)
    w.op("CONV_2D", [x, weights, b], [y], {"padding": padding, "stride_w": stride, "stride_h": stride,
                                           "dilation_w_factor": dilation, "dilation_h_factor": dilation,
                                           "fused_activation_function": "RELU"})
    _same_as_litert(w.build([x], [y]), (rng.standard_normal((2, 9, 8, 5)) + 0.4).astype(F32), tmp_path)


@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
def test_pad_folds_into_conv(per_channel, tmp_path):
    """A PAD of zeros before a VALID convolution (as converters write an uneven SAME) becomes the convolution's
    own padding: zeros change neither the input's range nor the sums."""
    rng = np.random.default_rng(9)
    w = TFLiteWriter()
    x, padded = w.tensor("x", [1, 8, 8, 3], F32), w.tensor("padded", [1, 9, 9, 3], F32)
    pads = w.tensor("pads", [4, 2], np.int32, np.array([[0, 0], [0, 1], [0, 1], [0, 0]], np.int32))
    w.op("PAD", [x, pads], [padded])
    weights = _weights(w, rng, [4, 3, 3, 3], 4 if per_channel else None)
    y = w.tensor("y", [1, 4, 4, 4], F32)
    w.op("CONV_2D", [padded, weights, w.tensor("b", [4], F32, rng.standard_normal(4).astype(F32))], [y],
         {"padding": "VALID", "stride_w": 2, "stride_h": 2})
    model = w.build([x], [y])
    _same_as_litert(model, rng.standard_normal((1, 8, 8, 3)).astype(F32), tmp_path)
    graph = import_graph(tmp_path / "model.tflite")
    for rewrite in PIPELINE:
        graph = rewrite(graph)
    assert [n.op for n in graph.nodes if n.op in ("Pad", "HybridConv")] == ["HybridConv"]


@pytest.mark.parametrize("multiplier", [1, 2])
def test_depthwise_conv_2d(multiplier, tmp_path):
    rng = np.random.default_rng(multiplier)
    w = TFLiteWriter()
    x = w.tensor("x", [1, 8, 7, 4], F32)
    c = 4 * multiplier
    weights = _weights(w, rng, [1, 3, 3, c], c, axis=3)
    b = w.tensor("b", [c], F32, rng.standard_normal(c).astype(F32))
    y = w.tensor("y", [1, 8, 7, c], F32)
    w.op("DEPTHWISE_CONV_2D", [x, weights, b], [y], {"padding": "SAME", "stride_w": 1, "stride_h": 1,
                                                     "depth_multiplier": multiplier})
    _same_as_litert(w.build([x], [y]), rng.standard_normal((1, 8, 7, 4)).astype(F32), tmp_path)


@pytest.mark.parametrize("target_name", ["cortex-m4", "cortex-m3"])
def test_network_under_qemu(target_name, tmp_path):
    """Convolution, depthwise, pointwise and dense layers in a row, their int8 products in the target's kernels
    (4-lane dot products and paired lanes on the Cortex-M4): LiteRT's results to the bit."""
    target = need_target(target_name)
    rng = np.random.default_rng(8)
    w = TFLiteWriter()

    def layer(op: str, x: int, shape, axis: int, out, options: dict) -> int:
        channels = shape[axis]
        b = w.tensor(f"b{len(w.operators)}", [channels], F32, rng.standard_normal(channels).astype(F32))
        y = w.tensor(f"y{len(w.operators)}", out, F32)
        w.op(op, [x, _weights(w, rng, shape, channels, axis), b], [y], {"stride_w": 1, "stride_h": 1, **options})
        return y
    x = w.tensor("x", [1, 9, 8, 6], F32)
    y = layer("CONV_2D", x, [8, 3, 3, 6], 0, [1, 9, 8, 8], {"padding": "SAME", "fused_activation_function": "RELU"})
    y = layer("DEPTHWISE_CONV_2D", y, [1, 3, 3, 8], 3, [1, 5, 4, 8],
              {"padding": "SAME", "stride_w": 2, "stride_h": 2, "depth_multiplier": 1})
    y = layer("CONV_2D", y, [16, 1, 1, 8], 0, [1, 5, 4, 16], {"padding": "VALID"})
    out = w.tensor("out", [1, 10], F32)
    w.op("FULLY_CONNECTED", [y, _weights(w, rng, [10, 320], None)], [out], {"asymmetric_quantize_inputs": True})
    model = w.build([x], [out])
    x_data = rng.standard_normal((1, 9, 8, 6)).astype(F32)
    (expected,) = run_litert(model, [x_data])
    path = tmp_path / "model.tflite"
    path.write_bytes(model)
    compiled = cglow.compile_model(path, options=Options(target=target.tiles))
    run = cross.run_image(cross.build_image(compiled, [x_data], target), compiled, target, count=False)
    np.testing.assert_array_equal(run.outputs[0], expected)


def test_float16_weights(tmp_path):
    """Weights and bias stored as float16, widened by DEQUANTIZE: float32 constants at compile time."""
    rng = np.random.default_rng(5)
    w = TFLiteWriter()
    x = w.tensor("x", [1, 6, 6, 3], F32)
    halves = [w.tensor(f"{name}16", shape, np.float16, rng.standard_normal(shape).astype(np.float16))
              for name, shape in (("w", [4, 3, 3, 3]), ("b", [4]))]
    weights, b = w.tensor("w", [4, 3, 3, 3], F32), w.tensor("b", [4], F32)
    y = w.tensor("y", [1, 6, 6, 4], F32)
    w.op("DEQUANTIZE", [halves[0]], [weights])
    w.op("DEQUANTIZE", [halves[1]], [b])
    w.op("CONV_2D", [x, weights, b], [y], {"padding": "SAME", "stride_w": 1, "stride_h": 1})
    model = w.build([x], [y])
    x_data = rng.standard_normal((1, 6, 6, 3)).astype(F32)
    (expected,) = run_litert(model, [x_data])
    compiled = _compiled(model, tmp_path)
    np.testing.assert_allclose(host.build(compiled).run(x_data)[0], expected, rtol=1e-5, atol=1e-5)
    assert compiled.weights_bytes == (4 * 27 + 4) * 4


def test_weights_stay_int8(tmp_path):
    """A hybrid dense layer's flash is about a quarter of the float one's: int8 weights, plus per channel a
    float scale, an int32 weight sum and the float bias."""
    rng = np.random.default_rng(6)
    float_bytes = _compiled(_dense_model(rng, 1, 256, 128, None, False, int8=False), tmp_path).weights_bytes
    hybrid_bytes = _compiled(_dense_model(rng, 1, 256, 128, 128, True), tmp_path).weights_bytes
    assert float_bytes == (256 + 1) * 128 * 4
    assert hybrid_bytes == 256 * 128 + 3 * 128 * 4


def test_float16_activation_is_refused(tmp_path):
    w = TFLiteWriter()
    x, y = w.tensor("x", [1, 4], np.float16), w.tensor("y", [1, 4], F32)
    w.op("DEQUANTIZE", [x], [y])
    with pytest.raises(CglowError, match="'x' is a float16 activation; cglow computes in float32"):
        _compiled(w.build([x], [y]), tmp_path)


def test_per_tensor_depthwise_is_refused(tmp_path):
    """LiteRT's hybrid depthwise kernel reads one weight scale per channel (and refuses a single one)."""
    rng = np.random.default_rng(7)
    w = TFLiteWriter()
    x = w.tensor("x", [1, 5, 5, 4], F32)
    weights = _weights(w, rng, [1, 3, 3, 4], None, axis=3)
    y = w.tensor("y", [1, 5, 5, 4], F32)
    w.op("DEPTHWISE_CONV_2D", [x, weights], [y], {"padding": "SAME", "stride_w": 1, "stride_h": 1,
                                                  "depth_multiplier": 1})
    with pytest.raises(CglowError, match=r"reads one weight scale per output channel \(4\); 'w' has 1"):
        _compiled(w.build([x], [y]), tmp_path)
