"""Each TFLite operator cglow reads, float32 and 8-bit (per-tensor and per-channel), against LiteRT's reference
kernels: 8-bit results to the bit, float ones within 1e-5."""
from __future__ import annotations

import numpy as np
import pytest

from tests.util import need_module

need_module("ai_edge_litert")

import cglow
from cglow.tools import host
from tests.tflite_file import TFLiteWriter, run_litert
from tests.tflite_net import KINDS, Net, check

ACTIVATIONS = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"]


@pytest.mark.parametrize("int8", KINDS)
@pytest.mark.parametrize("padding,stride,dilation,act", [
    ("SAME", 1, 1, "NONE"), ("SAME", 2, 1, "RELU"), ("VALID", 1, 2, "RELU6"), ("VALID", 2, 1, "RELU_N1_TO_1")])
def test_conv_2d(int8, padding, stride, dilation, act, tmp_path):
    net = Net(int8)
    x = net.input("x", [1, 11, 10, 5])
    w, scales = net.weights("w", [7, 3, 3, 5])
    b = net.bias("b", 7, net.scale(x), scales)
    out = -(-11 // stride) if padding == "SAME" else (10 - 2 * dilation) // stride + 1
    out_w = -(-10 // stride) if padding == "SAME" else (9 - 2 * dilation) // stride + 1
    y = net.value("y", [1, out, out_w, 7], scale=0.3 if int8 else None)
    net.w.op("CONV_2D", [x, w, b], [y], {"padding": padding, "stride_w": stride, "stride_h": stride,
                                         "dilation_w_factor": dilation, "dilation_h_factor": dilation,
                                         "fused_activation_function": act})
    check(net, [y], tmp_path)


@pytest.mark.parametrize("int8", KINDS)
@pytest.mark.parametrize("multiplier,stride", [(1, 1), (2, 2)])
def test_depthwise_conv_2d(int8, multiplier, stride, tmp_path):
    net = Net(int8, seed=1)
    x = net.input("x", [1, 9, 9, 6])
    c = 6 * multiplier
    w, scales = net.weights("w", [1, 3, 3, c], axis=3)
    b = net.bias("b", c, net.scale(x), scales)
    n = -(-9 // stride)
    y = net.value("y", [1, n, n, c], scale=0.1 if int8 else None)
    net.w.op("DEPTHWISE_CONV_2D", [x, w, b], [y], {"padding": "SAME", "stride_w": stride, "stride_h": stride,
                                                   "depth_multiplier": multiplier, "fused_activation_function": "RELU6"})
    check(net, [y], tmp_path)


@pytest.mark.parametrize("int8", KINDS)
@pytest.mark.parametrize("per_channel", [False, True])
def test_fully_connected(int8, per_channel, tmp_path):
    net = Net(int8, seed=2)
    x = net.input("x", [2, 3, 1, 16])  # flattened to rows of 16
    w, scales = net.weights("w", [10, 16], axis=0 if per_channel else None)
    b = net.bias("b", 10, net.scale(x), scales)
    y = net.value("y", [6, 10], scale=0.5 if int8 else None)
    net.w.op("FULLY_CONNECTED", [x, w, b], [y], {"fused_activation_function": "RELU"})
    check(net, [y], tmp_path)


@pytest.mark.parametrize("int8", KINDS)
@pytest.mark.parametrize("op,padding", [("MAX_POOL_2D", "SAME"), ("MAX_POOL_2D", "VALID"),
                                        ("AVERAGE_POOL_2D", "VALID")])
def test_pool_2d(int8, op, padding, tmp_path):
    net = Net(int8, seed=3)
    x = net.input("x", [1, 9, 8, 4], scale=0.1, zero=3)
    n, m = (5, 4) if padding == "SAME" else (4, 3)
    y = net.value("y", [1, n, m, 4], scale=0.1, zero=3)
    net.w.op(op, [x], [y], {"padding": padding, "stride_w": 2, "stride_h": 2, "filter_width": 3, "filter_height": 3,
                            "fused_activation_function": "RELU"})
    check(net, [y], tmp_path)


def test_average_pool_2d_same_padding(tmp_path):
    net = Net(False, seed=4)
    x = net.input("x", [1, 7, 7, 3])
    y = net.value("y", [1, 4, 4, 3])
    net.w.op("AVERAGE_POOL_2D", [x], [y], {"padding": "SAME", "stride_w": 2, "stride_h": 2, "filter_width": 3,
                                           "filter_height": 3})
    check(net, [y], tmp_path)


@pytest.mark.parametrize("int8", KINDS)
@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL"])
@pytest.mark.parametrize("act", ["NONE", "RELU6"])
def test_binary(int8, op, act, tmp_path):
    net = Net(int8, seed=5)
    a = net.input("a", [1, 6, 5, 8])
    b = net.input("b", [1, 1, 5, 8])  # broadcast along H
    y = net.value("y", [1, 6, 5, 8])
    net.w.op(op, [a, b], [y], {"fused_activation_function": act})
    check(net, [y], tmp_path)


@pytest.mark.parametrize("int8", KINDS)
@pytest.mark.parametrize("op", ["RELU", "RELU6", "RELU_N1_TO_1"])
def test_relu(int8, op, tmp_path):
    net = Net(int8, seed=6)
    x = net.input("x", [1, 4, 4, 16], scale=0.05, zero=-4)
    y = net.value("y", [1, 4, 4, 16], scale=0.03, zero=-128 if op == "RELU" else 2)
    net.w.op(op, [x], [y])
    check(net, [y], tmp_path)


@pytest.mark.parametrize("op,scales", [("RELU", (0.013588478788733482, 0.19647933542728424)),
                                       ("MUL", (0.04690147191286087, 0.010432346723973751, 0.059914883226156235))])
def test_factor_from_float32_scales(op, scales, tmp_path):
    """RELU's and MUL's Prepare compute their factor from the scales in float (a double quotient's multiplier
    differs in the last bits); with these scales that moves a result, over every input value (every pair)."""
    w = TFLiteWriter()
    *ins, out = [w.tensor(f"t{k}", [1, 65536], np.int8, scale=s, zero_point=0) for k, s in enumerate(scales)]
    w.op(op, ins, [out])
    model = w.build(ins, [out])
    values = np.arange(-128, 128)
    inputs = [np.tile(values, 256).reshape(1, -1).astype(np.int8),
              np.repeat(values, 256).reshape(1, -1).astype(np.int8)]
    path = tmp_path / "model.tflite"
    path.write_bytes(model)
    got = host.build(cglow.compile_model(path)).run(*inputs[:len(ins)])[0]
    np.testing.assert_array_equal(got, run_litert(model, inputs[:len(ins)])[0])


def test_quantize_and_dequantize(tmp_path):
    """float -> int8 rounds halves away from zero (the inputs are placed on halves), int8 -> int8 requantizes,
    int8 -> float."""
    w = TFLiteWriter()
    x = w.tensor("x", [1, 64], np.float32)
    q = w.tensor("q", [1, 64], np.int8, scale=0.25, zero_point=3)
    r = w.tensor("r", [1, 64], np.int8, scale=0.37, zero_point=-9)
    y = w.tensor("y", [1, 64], np.float32)
    w.op("QUANTIZE", [x], [q])
    w.op("QUANTIZE", [q], [r])
    w.op("DEQUANTIZE", [r], [y])
    model = w.build([x], [q, y])
    data = (np.arange(64, dtype=np.float32) - 32) * 0.125 + 0.0625 * (np.arange(64) % 3 - 1)
    inputs = [data.reshape(1, 64).astype(np.float32)]
    path = tmp_path / "q.tflite"
    path.write_bytes(model)
    got = host.build(cglow.compile_model(path)).run(*inputs)
    for e, g in zip(run_litert(model, inputs), got):
        np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize("int8", KINDS)
def test_movement(int8, tmp_path):
    """RESHAPE, EXPAND_DIMS, SQUEEZE, TRANSPOSE, PAD, CONCATENATION in one chain (8-bit: one scale)."""
    net = Net(int8, seed=9)
    quant = dict(scale=0.1, zero=-5)
    x = net.input("x", [1, 4, 6, 3], **quant)
    r = net.value("r", [1, 4, 18], **quant)
    net.w.op("RESHAPE", [x], [r], {"new_shape": [1, 4, 18]})
    axis = net.w.tensor("axis", [], np.int32, np.array(2, np.int32))
    e = net.value("e", [1, 4, 1, 18], **quant)
    net.w.op("EXPAND_DIMS", [r, axis], [e])
    s = net.value("s", [4, 18], **quant)
    net.w.op("SQUEEZE", [e], [s], {"squeeze_dims": [0, 2]})
    perm = net.w.tensor("perm", [2], np.int32, np.array([1, 0], np.int32))
    t = net.value("t", [18, 4], **quant)
    net.w.op("TRANSPOSE", [s, perm], [t])
    pads = net.w.tensor("pads", [2, 2], np.int32, np.array([[1, 0], [2, 3]], np.int32))
    p = net.value("p", [19, 9], **quant)
    net.w.op("PAD", [t, pads], [p])
    y = net.value("y", [19, 18], **quant)
    net.w.op("CONCATENATION", [p, p], [y], {"axis": 1})
    check(net, [y], tmp_path)


def test_float_mean(tmp_path):
    net = Net(False, seed=10)
    x = net.input("x", [1, 5, 6, 7])
    axes = net.w.tensor("axes", [2], np.int32, np.array([1, 2], np.int32))
    y = net.value("y", [1, 1, 1, 7])
    net.w.op("MEAN", [x, axes], [y], {"keep_dims": True})
    check(net, [y], tmp_path)


def ties_net(op: str, trial: int, rng) -> tuple[Net, int]:
    """Thousands of accumulators under a random scale, so that some land on (or next to) the halves where the
    roundings differ, and the op's output."""
    net = Net(True, seed=100 + trial)
    n = 1024
    weights = np.array([127, 113, 71, 1], np.int8)
    ws = float(rng.uniform(0.001, 0.05))
    zx = int(rng.integers(-5, 5))
    x = net.input("x", [1, n, 1, 4], scale=0.01, zero=zx)
    ys = float(rng.uniform(0.02, 0.5))
    if op in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
        depthwise = op == "DEPTHWISE_CONV_2D"
        m = 4 if depthwise else 1
        shape = [1, 4] if op == "FULLY_CONNECTED" else [1, 1, 1, 4]
        w = net.w.tensor("w", shape, np.int8, weights.reshape(shape), scale=[ws] * m, zero_point=[0] * m,
                         axis=3 if depthwise else 0)
        b = net.w.tensor("b", [m], np.int32, rng.integers(-99, 99, m).astype(np.int32),
                         scale=[0.01 * ws] * m, zero_point=[0] * m)
        if op == "FULLY_CONNECTED":
            y = net.value("y", [n, 1], scale=ys, zero=3)
            net.w.op(op, [x, w, b], [y], {})
        else:
            y = net.value("y", [1, n, 1, m], scale=ys, zero=3)
            net.w.op(op, [x, w, b], [y], {"padding": "VALID", "stride_w": 1, "stride_h": 1,
                                          **({"depth_multiplier": 1} if depthwise else {})})
    elif op in ("ADD", "MUL"):
        x2 = net.input("x2", [1, n, 1, 4], scale=float(rng.uniform(0.005, 0.05)), zero=2)
        y = net.value("y", [1, n, 1, 4], scale=ys / (8 if op == "ADD" else 1), zero=-1)
        net.w.op(op, [x, x2], [y], {})
    elif op == "RELU":
        y = net.value("y", [1, n, 1, 4], scale=float(rng.uniform(0.003, 0.02)), zero=-100)
        net.w.op(op, [x], [y])
    else:
        y = net.value("y", [1, n // 2, 1, 4], scale=0.01, zero=zx)
        net.w.op(op, [x], [y], {"padding": "VALID", "stride_w": 1, "stride_h": 2, "filter_width": 1,
                                "filter_height": 2})
    return net, y


@pytest.mark.parametrize("op", ["CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "MUL", "RELU",
                                "AVERAGE_POOL_2D"])
def test_ties_round_as_litert(op, tmp_path):
    """Near-ties under several random scales (ties_net): LiteRT's convolutions round twice
    (MultiplyByQuantizedMultiplier), its fully-connected kernels once with halves up, its Add scales each input
    first."""
    rng = np.random.default_rng(11)
    for trial in range(4):
        check(*ties_net(op, trial, rng), tmp_path)


@pytest.mark.parametrize("op", ["CONV_2D", "DEPTHWISE_CONV_2D"])
def test_ties_round_as_litert_on_cortex_m4(op, tmp_path):
    """The same on a Cortex-M4 under QEMU, where the convolutions' requantization is one SMMLAR
    (runtime_c/requant_tfl_high.c)."""
    rng = np.random.default_rng(11)
    for trial in range(2):
        check(*ties_net(op, trial, rng), tmp_path, target="cortex-m4")
