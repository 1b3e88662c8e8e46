"""Chains of ops the fusion passes merge (elementwise chains, divisors folded into Gemm and
LayerNormalization, Conv + BatchNormalization + activation, residuals, Concat of convolutions, attention,
a small CNN), compiled by cglow and run as C, against onnxruntime.

Float32 inputs and weights, seeded; every output within TOL = 1e-5 (tests/ops/test_ops_nn.py says why).
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from tests.onnx_ops import check, f32, i64, make_model, pos, rand, transpose_node


# --- chains (fusion passes) ---------------------------------------------------------------------------

def test_elementwise_chain():
    """Several maps in a row, with broadcasts and constants: one fused map."""
    nodes = [helper.make_node("Mul", ["x", "two"], ["a"]), helper.make_node("Add", ["a", "bias"], ["b"]),
             helper.make_node("Sub", ["b", "z"], ["c"]), helper.make_node("Relu", ["c"], ["d"]),
             helper.make_node("Div", ["d", "three"], ["e"]), helper.make_node("Sigmoid", ["e"], ["f"]),
             helper.make_node("Mul", ["f", "x"], ["y"])]
    inits = {"two": f32(2.0), "bias": rand(3, 1, seed=2), "three": f32(3.0)}
    check(make_model(nodes, {"x": (2, 3, 5), "z": (5,)}, ["y"], inits))


def test_gelu_chain():
    """x * 0.5 * (1 + erf(x / sqrt 2)), as PyTorch exports GELU: x is read by two maps."""
    nodes = [helper.make_node("Div", ["x", "sqrt2"], ["a"]), helper.make_node("Erf", ["a"], ["b"]),
             helper.make_node("Add", ["b", "one"], ["c"]), helper.make_node("Mul", ["x", "c"], ["d"]),
             helper.make_node("Mul", ["d", "half"], ["y"])]
    inits = {"sqrt2": f32(np.sqrt(2.0)), "one": f32(1.0), "half": f32(0.5)}
    check(make_model(nodes, {"x": (2, 8, 16)}, ["y"], inits), scale=2.0)


def test_chain_intermediate_read_twice():
    """A map result read twice by the next map (x*x pattern on an intermediate)."""
    nodes = [helper.make_node("Add", ["x", "one"], ["a"]), helper.make_node("Mul", ["a", "a"], ["b"]),
             helper.make_node("Sqrt", ["b"], ["y"])]
    check(make_model(nodes, {"x": (3, 7)}, ["y"], {"one": f32(1.0)}))


def test_chain_through_reshape():
    """Map, reshape, map: the fusion must see through the reshape, not through a broadcast."""
    nodes = [helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Reshape", ["a", "s"], ["r"]),
             helper.make_node("Mul", ["r", "z"], ["m"]), helper.make_node("Relu", ["m"], ["y"])]
    inits = {"b": rand(3, 1, 1, seed=2), "s": i64(2, -1)}
    check(make_model(nodes, {"x": (2, 3, 4, 5), "z": (2, 60)}, ["y"], inits))


def test_chain_into_transpose():
    """A map whose result is read through a transpose by the next map."""
    nodes = [helper.make_node("Mul", ["x", "k"], ["a"]), transpose_node("a", "t", (0, 2, 1)),
             helper.make_node("Add", ["t", "z"], ["s"]), helper.make_node("Tanh", ["s"], ["y"])]
    check(make_model(nodes, {"x": (2, 3, 4), "z": (4, 3)}, ["y"], {"k": f32(0.5)}))


@pytest.mark.parametrize("divide", ["Div", "Pow-1"])
@pytest.mark.parametrize("producer", ["gemm-alpha", "gemm-alpha-beta0", "layernorm-no-bias", "layernorm-bias"])
def test_fused_divisor(producer, divide):
    """A Gemm epilogue or LayerNormalization map fused into a divisor: the expression must stay grouped
    (z / (0.5 * acc), not z / 0.5 * acc). The producers' outputs are kept away from zero."""
    rng = np.random.default_rng(3)
    if producer.startswith("gemm"):
        extra = dict(beta=0.0) if producer.endswith("beta0") else {}
        node = helper.make_node("Gemm", ["x", "w"] + (["c"] if extra else []), ["p"], alpha=0.5, **extra)
        inits, shape = {"w": pos(5, 4, seed=2), "c": pos(4, seed=3)}, (3, 4)
        x = rng.uniform(0.5, 1.5, (3, 5))
    else:
        bias = ["b"] if producer == "layernorm-bias" else []
        node = helper.make_node("LayerNormalization", ["x", "s"] + bias, ["p"], axis=-1)
        inits, shape = {"s": pos(8, seed=2), "b": np.full(8, 0.25, np.float32)}, (2, 3, 8)
        signs = np.array([rng.permutation([1.0, -1.0] * 4) for _ in range(6)]).reshape(shape)
        x = rng.standard_normal((2, 3, 1)) + rng.uniform(0.5, 2.0, (2, 3, 1)) * signs  # normalizes to +-1
        inits = {k: v for k, v in inits.items() if k != "b" or bias}
    if divide == "Div":
        last, inputs = helper.make_node("Div", ["z", "p"], ["y"]), {"x": x.shape, "z": shape}
    else:
        last, inputs = helper.make_node("Pow", ["p", "e"], ["y"]), {"x": x.shape}
        inits["e"] = f32(-1.0)
    model = make_model([node, last], inputs, ["y"], inits, 17)
    feeds = {"x": x.astype(np.float32), "z": rand(*shape, seed=4)}
    check(model, feeds={k: v for k, v in feeds.items() if k in inputs})


def _conv_bn(x: str, out: str, cin: int, cout: int, seed: int, inits: dict, bias: bool = True, **attrs):
    inits[f"{out}_w"] = rand(cout, cin // attrs.get("group", 1), 3, 3, seed=seed, scale=0.5)
    conv_in = [x, f"{out}_w"]
    if bias:
        inits[f"{out}_b"] = rand(cout, seed=seed + 1)
        conv_in.append(f"{out}_b")
    for i, (k, v) in enumerate([("g", pos(cout, seed=seed + 2)), ("bb", rand(cout, seed=seed + 3)),
                                ("m", rand(cout, seed=seed + 4)), ("v", pos(cout, seed=seed + 5))]):
        inits[f"{out}_{k}"] = v
    return [helper.make_node("Conv", conv_in, [f"{out}_c"], pads=[1] * 4, **attrs),
            helper.make_node("BatchNormalization", [f"{out}_c"] + [f"{out}_{k}" for k in ("g", "bb", "m", "v")],
                             [out])]


@pytest.mark.parametrize("act", ["relu", "relu6", "none"])
def test_conv_bn_act(act):
    inits: dict = {}
    nodes = _conv_bn("x", "bn", 3, 4, 2, inits)
    if act == "relu":
        nodes.append(helper.make_node("Relu", ["bn"], ["y"]))
    elif act == "relu6":
        inits.update(lo=f32(0.0), hi=f32(6.0))
        nodes.append(helper.make_node("Clip", ["bn", "lo", "hi"], ["y"]))
    else:
        nodes.append(helper.make_node("Identity", ["bn"], ["y"]))
    check(make_model(nodes, {"x": (1, 3, 7, 7)}, ["y"], inits), scale=2.0)


def test_depthwise_bn_relu_residual():
    """Depthwise conv without bias, BN, residual Add, Relu (MobileNet block tail)."""
    inits: dict = {}
    nodes = _conv_bn("x", "bn", 4, 4, 2, inits, bias=False, group=4)
    nodes += [helper.make_node("Add", ["bn", "x"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    check(make_model(nodes, {"x": (1, 4, 6, 6)}, ["y"], inits))


def test_conv1d_bn_relu():
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1], strides=[2]),
             helper.make_node("BatchNormalization", ["c", "g", "bb", "m", "v"], ["n"]),
             helper.make_node("Relu", ["n"], ["y"])]
    inits = {"w": rand(4, 3, 3, seed=2), "b": rand(4, seed=3), "g": pos(4, seed=4), "bb": rand(4, seed=5),
             "m": rand(4, seed=6), "v": pos(4, seed=7)}
    check(make_model(nodes, {"x": (2, 3, 11)}, ["y"], inits))


def test_conv_scale_shift_residual():
    """Conv, then per-channel Mul and Add constants and a residual Add of a run-time input."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1] * 4), helper.make_node("Mul", ["c", "k"], ["m"]),
             helper.make_node("Add", ["m", "s"], ["a"]), helper.make_node("Add", ["a", "x"], ["y"])]
    inits = {"w": rand(3, 3, 3, 3, seed=2), "k": pos(3, 1, 1, seed=3), "s": rand(3, 1, 1, seed=4)}
    check(make_model(nodes, {"x": (1, 3, 5, 5)}, ["y"], inits))


def test_matmul_residual():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "x"], ["y"])]
    check(make_model(nodes, {"x": (2, 3, 4)}, ["y"], {"w": rand(4, 4, seed=2)}))


def test_matmul_bias_relu():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["y"])]
    check(make_model(nodes, {"x": (2, 3, 5)}, ["y"], {"w": rand(5, 4, seed=2), "b": rand(4, seed=3)}))


def test_gemm_relu():
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["g"], transB=1), helper.make_node("Relu", ["g"], ["y"])]
    check(make_model(nodes, {"x": (2, 6)}, ["y"], {"w": rand(5, 6, seed=2), "b": rand(5, seed=3)}))


@pytest.mark.parametrize("tail", ["output", "relu"])
def test_concat_of_convs(tail):
    """Conv outputs concatenated along channels: the convs can write straight into the slices."""
    inits = {"w1": rand(2, 3, 3, 3, seed=2), "b1": rand(2, seed=3), "w2": rand(3, 3, 1, 1, seed=4),
             "w3": rand(1, 3, 3, 3, seed=5), "b3": rand(1, seed=6)}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1] * 4),
             helper.make_node("Conv", ["x", "w2"], ["c2"]),
             helper.make_node("Conv", ["x", "w3", "b3"], ["c3"], pads=[1] * 4),
             helper.make_node("Relu", ["c3"], ["r3"]),
             helper.make_node("Concat", ["c1", "c2", "r3"], ["cat" if tail == "relu" else "y"], axis=1)]
    if tail == "relu":
        nodes.append(helper.make_node("Relu", ["cat"], ["y"]))
    check(make_model(nodes, {"x": (1, 3, 6, 6)}, ["y"], inits))


def test_concat_of_convs_batch2():
    """Channel slices of a batch-2 tensor are not contiguous: the convs write strided slices, or copy."""
    inits = {"w1": rand(2, 3, 3, 3, seed=2), "w2": rand(3, 3, 1, 1, seed=4)}
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1] * 4),
             helper.make_node("Conv", ["x", "w2"], ["c2"]),
             helper.make_node("Concat", ["c1", "c2"], ["y"], axis=1)]
    check(make_model(nodes, {"x": (2, 3, 4, 4)}, ["y"], inits))


def test_concat_of_convs_reused():
    """A conv output read by the concat and by a later node."""
    inits = {"w1": rand(2, 3, 3, 3, seed=2), "w2": rand(3, 3, 1, 1, seed=4)}
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1] * 4),
             helper.make_node("Conv", ["x", "w2"], ["c2"]),
             helper.make_node("Concat", ["c1", "c2", "c1"], ["cat"], axis=1),
             helper.make_node("Relu", ["c1"], ["r"]), helper.make_node("Conv", ["cat", "w3"], ["m"]),
             helper.make_node("Add", ["m", "r"], ["y"])]
    inits["w3"] = rand(2, 7, 1, 1, seed=5)
    check(make_model(nodes, {"x": (1, 3, 4, 4)}, ["y"], inits))


def test_concat_of_gemms():
    """Gemm outputs (with bias epilogues) stacked on axis 0: contiguous slices."""
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["g1"], transB=1),
             helper.make_node("Gemm", ["x", "w2", "b2"], ["g2"], transB=1, alpha=0.5),
             helper.make_node("Concat", ["g1", "g2"], ["y"], axis=0)]
    inits = {"w1": rand(4, 5, seed=2), "b1": rand(4, seed=3), "w2": rand(4, 5, seed=4), "b2": rand(1, 4, seed=5)}
    check(make_model(nodes, {"x": (3, 5)}, ["y"], inits))


def test_concat_of_convs_last_axis():
    """Concat along width (slices not contiguous), one conv output used twice."""
    inits = {"w1": rand(2, 3, 3, 3, seed=2), "w2": rand(2, 3, 1, 1, seed=4)}
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1] * 4),
             helper.make_node("Conv", ["x", "w2"], ["c2"]),
             helper.make_node("Concat", ["c1", "c2", "c1"], ["y"], axis=-1)]
    check(make_model(nodes, {"x": (1, 3, 4, 5)}, ["y"], inits))


def test_attention():
    """softmax(q k^T / sqrt d) v with q, k, v from one input."""
    nodes = [helper.make_node("MatMul", ["x", "wq"], ["q"]), helper.make_node("MatMul", ["x", "wk"], ["k"]),
             helper.make_node("MatMul", ["x", "wv"], ["v"]), transpose_node("k", "kt", (0, 2, 1)),
             helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Div", ["s", "d"], ["sd"]),
             helper.make_node("Softmax", ["sd"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["y"])]
    inits = {"wq": rand(8, 8, seed=2), "wk": rand(8, 8, seed=3), "wv": rand(8, 8, seed=4), "d": f32(np.sqrt(8.0))}
    check(make_model(nodes, {"x": (2, 5, 8)}, ["y"], inits))


@pytest.mark.parametrize("opset", [11, 17, 21])
def test_small_cnn(opset):
    """Conv-Relu-MaxPool-Flatten-Gemm at the ends of the supported opset range."""
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1] * 4), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"]), helper.make_node("Gemm", ["f", "fc", "fb"], ["y"], transB=1)]
    inits = {"w": rand(4, 2, 3, 3, seed=2), "b": rand(4, seed=3), "fc": rand(3, 36, seed=4), "fb": rand(3, seed=5)}
    check(make_model(nodes, {"x": (2, 2, 6, 6)}, ["y"], inits, opset))
