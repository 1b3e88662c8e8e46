"""Post-training quantization (cglow.quantize, `cglow quantize`, `cglow emit --int8`): the QDQ model is valid
ONNX that onnxruntime runs, stays close to the float model, and has the structure the design promises
(int8 weights per channel, int32 biases at x_scale * w_scale, Q after Relu, BatchNorm folded, one pair per
tensor); the calibration methods; the calibration file checks; the command line."""
from __future__ import annotations

from collections import Counter
import functools
from pathlib import Path
import subprocess

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import pytest

from cglow import CglowError, zoo
from cglow.quantize import calibrate, load_calibration, quantize, quantize_model
from cglow.quantize.calibrate import collect_ranges, entropy_threshold, ranges
from cglow.quantize.prepare import prepare
from cglow.quantize.qdq import activation_params, plan_qdq
from tests.util import cglow_cmd

CALIBRATION_SAMPLES = 8


def input_shape(model: onnx.ModelProto, index: int = 0) -> tuple[int, ...]:
    return tuple(d.dim_value for d in model.graph.input[index].type.tensor_type.shape.dim)


def samples(model: onnx.ModelProto, count: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((count, *input_shape(model))).astype(np.float32)


@functools.cache
def zoo_case(name: str, method: str = "minmax", per_channel: bool = True) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """A zoo model and its QDQ model, calibrated on seeded normal samples (seed 0)."""
    model = zoo.build(name)
    calib = {"input": samples(model, CALIBRATION_SAMPLES, seed=0)}
    return model, quantize_model(model, calib, method=method, per_channel=per_channel)


def run(model: onnx.ModelProto, batch: dict[str, np.ndarray]) -> np.ndarray:
    """The first output of `model` on each sample of the batch, stacked."""
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    count = len(next(iter(batch.values())))
    return np.stack([session.run(None, {n: x[i] for n, x in batch.items()})[0] for i in range(count)])


def consts(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def producers(model: onnx.ModelProto) -> dict[str, onnx.NodeProto]:
    return {out: node for node in model.graph.node for out in node.output}


def readers(model: onnx.ModelProto, name: str) -> list[onnx.NodeProto]:
    return [node for node in model.graph.node if name in node.input]


def attr(node: onnx.NodeProto, name: str, default=None):
    return next((helper.get_attribute_value(a) for a in node.attribute if a.name == name), default)


# Held-out inputs (seed 1, not the calibration samples). Bounds, measured with margin: int8 rounding adds
# about 0.4 % noise per layer, which grows through the layers and saturates outputs beyond the 8 calibration
# samples' range: kws (seeded random weights, so its 12 softmax outputs are nearly tied, at most about 0.25)
# has 1.5 to 3 % mean relative error and flips the top-1 class of 1 input in 10; resnet8 2 to 3.5 % and vww
# under 1.2 % keep every top-1 class; the 10-layer autoencoder is at 5 to 13 % (seeds 0 to 2). A wrong
# scale, zero point, channel axis or bias scale gives errors of the order of the outputs themselves (100 %).
@pytest.mark.parametrize("name, top1, error", [("kws", 0.75, 0.06), ("resnet8", 0.9, 0.08), ("vww", 0.9, 0.03),
                                               ("autoencoder", None, 0.2)])
def test_qdq_model_is_valid_and_close_to_the_float_model(name, top1, error):
    model, qdq = zoo_case(name)
    onnx.checker.check_model(qdq, full_check=True)
    assert max(o.version for o in qdq.opset_import if o.domain in ("", "ai.onnx")) >= 13
    ops = Counter(n.op_type for n in qdq.graph.node)
    assert ops["QuantizeLinear"] > 5 and ops["DequantizeLinear"] > ops["QuantizeLinear"]
    assert "BatchNormalization" not in ops
    batch = {"input": samples(model, 16, seed=1)}
    want, got = run(model, batch), run(qdq, batch)
    assert got.shape == want.shape and got.dtype == np.float32
    assert 0 < np.abs(got - want).mean() / np.abs(want).mean() < error   # 0: the pairs do round
    if top1 is not None:
        assert (got.reshape(16, -1).argmax(1) == want.reshape(16, -1).argmax(1)).mean() >= top1


@pytest.mark.parametrize("method", ["percentile", "entropy"])
def test_every_method_gives_a_working_model(method):
    model, qdq = zoo_case("kws", method)
    onnx.checker.check_model(qdq, full_check=True)
    batch = {"input": samples(model, 16, seed=1)}
    want = run(model, batch)
    assert np.abs(run(qdq, batch) - want).mean() / np.abs(want).mean() < 0.06
    scales = {t.name: float(numpy_helper.to_array(t)) for t in qdq.graph.initializer if t.name.endswith("relu_scale")}
    minmax = {t.name: float(numpy_helper.to_array(t)) for t in zoo_case("kws")[1].graph.initializer
              if t.name.endswith("relu_scale")}
    assert scales.keys() == minmax.keys() and len(scales) == 9
    assert all(scales[n] <= minmax[n] for n in scales) and scales != minmax  # clipped ranges, never wider


@pytest.mark.parametrize("name, per_channel", [("resnet8", True), ("kws", True), ("autoencoder", True),
                                               ("kws", False)])
def test_weights_are_int8_and_biases_int32_at_x_scale_times_w_scale(name, per_channel):
    model, qdq = zoo_case(name, per_channel=per_channel)
    folded = consts(prepare(model))
    values, made = consts(qdq), producers(qdq)
    layers = [n for n in qdq.graph.node if n.op_type in ("Conv", "Gemm", "MatMul")]
    assert layers and all(n.op_type != "MatMul" for n in layers)  # MatMul + Add became a Gemm
    for node in layers:
        x_dq, w_dq, b_dq = (made[i] for i in node.input)
        assert x_dq.op_type == w_dq.op_type == b_dq.op_type == "DequantizeLinear"
        q, w_scale, w_zero = (values[i] for i in w_dq.input)
        w = folded[w_dq.input[0].removesuffix("_quantized")]
        assert q.dtype == np.int8 and q.shape == w.shape and not w_zero.any() and np.abs(q).max() <= 127
        if not per_channel:
            assert w_scale.shape == () and np.abs(q).max() == 127
            channels = w_scale.reshape(1)
        else:
            axis = 0 if node.op_type == "Conv" or attr(node, "transB", 0) else 1
            assert attr(w_dq, "axis") == axis and w_scale.shape == w_zero.shape == (w.shape[axis],)
            assert (np.abs(np.moveaxis(q, axis, 0)).reshape(w.shape[axis], -1).max(1) == 127).all()
            channels = w_scale.reshape([-1 if d == axis else 1 for d in range(w.ndim)])
        assert np.abs(q * channels - w).max() <= w_scale.max() / 2 * 1.0001
        b_q, b_scale = (values[i] for i in b_dq.input)   # no zero point: int32 has none (it is 0)
        x_scale = values[x_dq.input[1]]
        assert b_q.dtype == np.int32 and len(b_dq.input) == 2
        assert np.array_equal(b_scale, (x_scale * w_scale).astype(np.float32))
        bias = folded[b_dq.input[0].removesuffix("_quantized")]
        assert np.abs(b_q * b_scale - bias).max() <= b_scale.max() / 2 * 1.0001


def test_activation_scale_and_zero_point_follow_the_calibrated_range():
    model, qdq = zoo_case("resnet8")
    prepared = prepare(model)
    plan = plan_qdq(prepared)
    got = collect_ranges(prepared, {"input": samples(model, CALIBRATION_SAMPLES, seed=0)}, plan.calibrated)
    values = consts(qdq)
    assert {"input", "stem/relu", "stack1/relu", "pool", "fc/gemm"} <= set(got)
    for name in got:
        lo, hi = got[name]
        scale, zero = values[f"{name}_scale"], values[f"{name}_zero_point"]
        assert scale.dtype == np.float32 and zero.dtype == np.int8 and scale.shape == zero.shape == ()
        assert np.isclose(scale, (hi - lo) / 255, rtol=1e-6)
        assert zero == np.clip(np.round(-128 - lo / scale), -128, 127)
    assert got["stem/relu"][0] == 0 and values["stem/relu_zero_point"] == -128
    assert activation_params(-1.0, 3.0) == (np.float32(4 / 255), np.int8(-64))
    assert activation_params(0.0, 0.0)[0] > 0 and activation_params(2.0, 5.0)[1] == -128  # 0 stays in range


def test_relu_after_a_layer_gets_the_pair_after_it():
    for name, layers in (("kws", 9), ("resnet8", 4 + 3), ("vww", 27)):   # resnet8: 3 of them after an Add
        _, qdq = zoo_case(name)                                          # vww: Clip(0, 6)
        made, fused = producers(qdq), 0
        for relu in (n for n in qdq.graph.node if n.op_type in ("Relu", "Clip")):
            layer = made[relu.input[0]]
            if layer.op_type in ("Conv", "Add"):
                assert readers(qdq, relu.input[0]) == [relu]
                assert [n.op_type for n in readers(qdq, relu.output[0])] == ["QuantizeLinear"]
                fused += 1
        assert fused == layers


def test_zero_and_tiny_weight_channels_get_a_usable_scale():
    w = np.random.default_rng(11).normal(0, 0.5, (4, 2, 3, 3)).astype(np.float32)
    w[1], w[2], w[3] = 0, 1e-30, 0   # channels of zeros and of denormal-small weights
    bias = np.array([0.1, 0.5, -2000.0, 0.0], np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1])]
    model = tiny_model(nodes, [vi("x", [1, 2, 5, 5])], [vi("y", [1, 4, 5, 5])],
                       [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "b")])
    batch = {"x": np.random.default_rng(12).standard_normal((4, 1, 2, 5, 5)).astype(np.float32) * 1e-3}
    qdq = quantize_model(model, batch)
    made, values = producers(qdq), consts(qdq)
    conv = next(n for n in qdq.graph.node if n.op_type == "Conv")
    w_scale, b_q, b_scale = values[made[conv.input[1]].input[1]], *(values[i] for i in made[conv.input[2]].input)
    assert (w_scale >= 2.0 ** -32).all() and w_scale[3] == 2.0 ** -32 and (b_scale >= np.finfo(np.float32).tiny).all()
    np.testing.assert_allclose(b_q * b_scale, bias, rtol=1e-6, atol=b_scale.max())   # -2000 fits in int32
    want, got = run(model, batch), run(qdq, batch)
    assert np.abs(got - want).max() < 0.01 * np.abs(want).max()


def test_model_inputs_and_outputs_stay_float():
    for name, last in (("kws", "Softmax"), ("autoencoder", "DequantizeLinear")):
        model, qdq = zoo_case(name)
        assert [v.name for v in qdq.graph.input] == ["input"] and [v.name for v in qdq.graph.output] == ["output"]
        assert qdq.graph.input[0].type == model.graph.input[0].type
        assert qdq.graph.output[0].type.tensor_type.elem_type == TensorProto.FLOAT
        assert [n.op_type for n in readers(qdq, "input")] == ["QuantizeLinear"]
        assert producers(qdq)["output"].op_type == last


def test_one_pair_per_tensor_and_data_movement_reuses_its_input_scale():
    _, qdq = zoo_case("resnet8")
    quantized = Counter(n.input[0] for n in qdq.graph.node if n.op_type == "QuantizeLinear")
    assert quantized and max(quantized.values()) == 1
    made = producers(qdq)
    shortcut = "stem/relu"  # read by stack1's first conv and by its residual add
    assert {n.op_type for n in readers(qdq, shortcut)} == {"Conv", "Add"}
    assert made[shortcut].op_type == "DequantizeLinear"
    flatten = next(n for n in qdq.graph.node if n.op_type == "Flatten")
    pool_dq = made[flatten.input[0]]
    flatten_q = readers(qdq, flatten.output[0])[0]
    assert flatten_q.op_type == "QuantizeLinear" and flatten_q.input[1:] == pool_dq.input[1:]


def test_keep_float_leaves_the_op_in_float():
    model = zoo.build("kws")
    calib = {"input": samples(model, CALIBRATION_SAMPLES, seed=0)}
    result = quantize(model, calib, keep_float=["fc/gemm", "AveragePool"])
    qdq, made = result.model, producers(result.model)
    gemm = next(n for n in qdq.graph.node if n.op_type == "Gemm")
    assert [made[i].op_type for i in gemm.input[:1]] == ["DequantizeLinear"]   # its input is dequantized
    assert all(i not in made and consts(qdq)[i].dtype == np.float32 for i in gemm.input[1:])  # float weights
    assert readers(qdq, gemm.output[0])[0].op_type == "Softmax"   # no pair: Softmax is float too
    assert Counter(result.float_ops) == {"Gemm": 1, "AveragePool": 1, "Softmax": 1}
    assert Counter(result.quantized_ops) == {"Conv": 9, "Relu": 9, "Flatten": 1}
    with pytest.raises(CglowError, match="'NoSuchOp'"):
        quantize(model, calib, keep_float=["NoSuchOp"])
    autoencoder = zoo.build("autoencoder")   # kept float, BatchNorm is not folded, nor MatMul made a Gemm
    result = quantize(autoencoder, {"input": samples(autoencoder, 4, seed=0)},
                      keep_float=["MatMul", "BatchNormalization"])
    assert Counter(result.float_ops) == {"BatchNormalization": 9, "MatMul": 3}
    assert Counter(result.quantized_ops) == {"Gemm": 7, "Relu": 9, "Add": 3}


def tiny_model(nodes, inputs, outputs, inits=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "tiny", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def test_unfoldable_batchnorm_stays_float_between_dq_and_q_and_passthrough_ops_go():
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.normal(0, 0.5, (4, 2, 3, 3)).astype(np.float32), "w"),
             *(numpy_helper.from_array(v.astype(np.float32), n) for n, v in
               (("gamma", rng.uniform(0.5, 1.5, 4)), ("beta", rng.normal(0, 0.1, 4)),
                ("mean", rng.normal(0, 0.1, 4)), ("var", rng.uniform(0.5, 1.5, 4))))]
    nodes = [helper.make_node("Identity", ["x"], ["xi"]),
             helper.make_node("Conv", ["xi", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["b"]),
             helper.make_node("Add", ["c", "b"], ["s"]),     # c is read twice: the BatchNorm cannot fold
             helper.make_node("Dropout", ["s"], ["d"]),
             helper.make_node("Relu", ["d"], ["y"])]
    model = tiny_model(nodes, [vi("x", [1, 2, 6, 6])], [vi("y", [1, 4, 6, 6])], inits)
    prepared = prepare(model)
    assert [n.op_type for n in prepared.graph.node] == ["Conv", "BatchNormalization", "Add", "Relu"]
    batch = {"x": np.random.default_rng(4).standard_normal((8, 1, 2, 6, 6)).astype(np.float32)}
    np.testing.assert_allclose(run(prepared, batch), run(model, batch), rtol=1e-5, atol=1e-5)
    qdq = quantize_model(model, batch)
    onnx.checker.check_model(qdq, full_check=True)
    bn, made = next(n for n in qdq.graph.node if n.op_type == "BatchNormalization"), producers(qdq)
    assert made[bn.input[0]].op_type == "DequantizeLinear"
    assert [n.op_type for n in readers(qdq, bn.output[0])] == ["QuantizeLinear"]
    want = run(model, batch)
    assert np.abs(run(qdq, batch) - want).max() < 0.03 * np.abs(want).max()


def test_every_output_of_a_float_op_read_by_a_quantized_op_gets_a_pair():
    nodes = [helper.make_node("Split", ["x"], ["s0", "s1"], axis=1),
             helper.make_node("Concat", ["s1", "s0"], ["c"], axis=1),
             helper.make_node("Transpose", ["s1"], ["t"], perm=[0, 2, 1])]
    model = tiny_model(nodes, [vi("x", [1, 4, 3])], [vi("c", [1, 4, 3]), vi("t", [1, 3, 2])])
    batch = {"x": np.random.default_rng(10).standard_normal((4, 1, 4, 3)).astype(np.float32)}
    result = quantize(model, batch)
    qdq, made = result.model, producers(result.model)
    onnx.checker.check_model(qdq, full_check=True)
    assert result.float_ops == ("Split",) and result.quantized_ops == ("Concat", "Transpose")
    assert sorted(n.input[0] for n in qdq.graph.node if n.op_type == "QuantizeLinear") == ["c_f32", "s0_f32",
                                                                                         "s1_f32", "t_f32"]
    assert made["t"].input[1:] == made["s1"].input[1:]   # Transpose keeps its input's scale and zero point
    for want, got in zip(run(model, batch), run(qdq, batch)):
        assert np.abs(got - want).max() < 0.02 * np.abs(want).max()


def test_batchnorm_after_gemm_and_matmul_is_folded_exactly():
    model = zoo.build("autoencoder")
    prepared = prepare(model)
    ops = Counter(n.op_type for n in prepared.graph.node)
    assert ops == {"Gemm": 10, "Relu": 9}
    batch = {"input": samples(model, 4, seed=5)}
    np.testing.assert_allclose(run(prepared, batch), run(model, batch), rtol=1e-4, atol=1e-4)


def two_input_model() -> onnx.ModelProto:
    """MatMul of two inputs, MatMul by a constant [3, 5] (rank 3 on the left: no Gemm), Mul by 0.5, Tanh."""
    w = np.random.default_rng(8).normal(0, 0.6, (3, 5)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["a", "b"], ["m"]),
             helper.make_node("MatMul", ["m", "w"], ["mw"]),
             helper.make_node("Mul", ["mw", "half"], ["h"]),
             helper.make_node("Tanh", ["h"], ["y"])]
    return tiny_model(nodes, [vi("a", [1, 4, 8]), vi("b", [1, 8, 3])], [vi("y", [1, 4, 5])],
                      [numpy_helper.from_array(np.array(0.5, np.float32), "half"), numpy_helper.from_array(w, "w")])


def test_matmul_of_two_runtime_operands_and_constant_operands_are_quantized():
    model = two_input_model()
    rng = np.random.default_rng(6)
    batch = {"a": rng.standard_normal((8, 1, 4, 8)).astype(np.float32),
             "b": rng.standard_normal((8, 1, 8, 3)).astype(np.float32)}
    qdq = quantize_model(model, batch)
    onnx.checker.check_model(qdq, full_check=True)
    made, values = producers(qdq), consts(qdq)
    (runtime, constant), mul = (n for n in qdq.graph.node if n.op_type == "MatMul"), \
        next(n for n in qdq.graph.node if n.op_type == "Mul")
    assert [made[i].op_type for i in (*runtime.input, *constant.input, *mul.input)] == ["DequantizeLinear"] * 6
    assert values[made[mul.input[1]].input[0]].dtype == np.int8
    w_dq = made[constant.input[1]]   # per output column: the last axis of B
    assert attr(w_dq, "axis") == 1 and values[w_dq.input[1]].shape == (5,) and values[w_dq.input[0]].dtype == np.int8
    want = run(model, batch)   # tanh of h in about [-6, 6]: a step of h is about 0.05
    assert np.abs(run(qdq, batch) - want).max() < 0.08


def test_calibration_without_onnxruntime_uses_the_reference_evaluator(monkeypatch):
    model = two_input_model()
    rng = np.random.default_rng(9)
    batch = {"a": rng.standard_normal((3, 1, 4, 8)).astype(np.float32),
             "b": rng.standard_normal((3, 1, 8, 3)).astype(np.float32)}
    names = ["a", "m", "mw", "y"]
    with_ort = collect_ranges(prepare(model), batch, names)
    monkeypatch.setattr(calibrate, "_onnxruntime", lambda model: None)
    without = collect_ranges(prepare(model), batch, names)
    assert with_ort.keys() == without.keys() == set(names)
    np.testing.assert_allclose(list(with_ort.values()), list(without.values()), rtol=1e-5)
    assert with_ort["a"] == (batch["a"].min(), batch["a"].max())


def test_calibration_methods_on_a_tensor_with_an_outlier():
    rng = np.random.default_rng(7)
    data = rng.standard_normal((8, 4096))
    data[3, 100] = 100.0   # one value in 32768, far outside the others (|x| < 4.5)
    bulk = np.abs(np.delete(data.reshape(-1), 3 * 4096 + 100)).max()
    got = {m: ranges(lambda i: {"x": data[i]}, len(data), m)["x"] for m in ("minmax", "percentile", "entropy")}
    assert got["minmax"] == (data.min(), 100.0)
    for method in ("percentile", "entropy"):
        lo, hi = got[method]
        assert -bulk <= lo < -0.6 * bulk and 0.6 * bulk < hi < 2 * bulk, (method, hi, bulk)  # the outlier clipped
    assert got["percentile"] != got["entropy"]
    assert ranges(lambda i: {"x": data[i]}, len(data), "percentile", percentile=100)["x"] == got["minmax"]
    # one sign and half zeros, as after a ReLU: every range starts at 0, entropy keeps the bulk
    relu = np.maximum(data, 0)
    got = {m: ranges(lambda i: {"x": relu[i]}, len(data), m)["x"] for m in ("minmax", "percentile", "entropy")}
    assert {lo for lo, _ in got.values()} == {0.0} and all(0.6 * bulk < hi for _, hi in got.values())
    ranges_of_positive = ranges(lambda i: {"x": data[i] + 10}, len(data), "minmax")["x"]
    assert ranges_of_positive[0] == 0.0   # 0 is always in the range


def test_entropy_keeps_a_uniform_histogram_whole_and_clips_a_lone_outlier():
    assert entropy_threshold(np.full(2048, 10), 128) == 2048
    gaussian = np.round(1e5 * np.exp(-(np.arange(2048) / 60) ** 2 / 2)).astype(np.int64)  # sd 60 bins
    assert gaussian[297] == 0 < gaussian[296]
    gaussian[2047] = 1   # the bins up to 296 hold 6.5 million values, the last bin one
    assert 4 * 60 <= entropy_threshold(gaussian, 128) <= 297
    assert 4 * 60 <= entropy_threshold(gaussian, 255) <= 297


def test_calibration_file_is_checked(tmp_path):
    model = two_input_model()
    a, b = np.zeros((4, 1, 4, 8), np.float32), np.zeros((4, 1, 8, 3), np.float32)
    cases = {"missing": ({"a": a}, "no calibration data for input 'b'"),
             "unknown": ({"a": a, "b": b, "c": b}, "no model input named 'c'"),
             "shape": ({"a": a, "b": b[:, :, :4]}, r"input 'b': expected float32 samples of shape \(S,1,8,3\)"),
             "dtype": ({"a": a.astype(np.float64), "b": b}, "input 'a': expected float32 samples"),
             "unbatched": ({"a": a[0], "b": b}, r"of shape \(S,1,4,8\) with S >= 1, got float32 of shape \(1, 4, 8\)"),
             "counts": ({"a": a, "b": b[:3]}, r"different numbers of samples \(\[3, 4\]\)")}
    for name, (arrays, message) in cases.items():
        np.savez(tmp_path / f"{name}.npz", **arrays)
        with pytest.raises(CglowError, match=message):
            load_calibration(tmp_path / f"{name}.npz", model)
    with pytest.raises(CglowError, match="no calibration data for input 'b'"):
        quantize_model(model, {"a": a})
    np.savez(tmp_path / "good.npz", a=a, b=b)
    assert set(load_calibration(tmp_path / "good.npz", model)) == {"a", "b"}
    np.save(tmp_path / "single.npy", a)
    (tmp_path / "junk.npz").write_bytes(b"PK\x03\x04 truncated")
    for path, message in (("single.npy", "expected a .npz file"), ("junk.npz", "not a readable .npz file"),
                          ("missing.npz2", "no such file")):
        with pytest.raises(CglowError, match=message):
            load_calibration(tmp_path / path, model)


def test_single_input_model_takes_any_array_name(tmp_path):
    model = zoo.build("kws")
    np.savez(tmp_path / "calib.npz", features=samples(model, 2, seed=0))
    assert list(load_calibration(tmp_path / "calib.npz", model)) == ["input"]


def test_cli_quantize_writes_the_model(tmp_path):
    model = zoo.build("resnet8")
    onnx.save(model, tmp_path / "r.onnx")
    np.savez(tmp_path / "calib.npz", x=samples(model, CALIBRATION_SAMPLES, seed=0))
    out = tmp_path / "out" / "r_int8.onnx"
    result = cglow_cmd("quantize", str(tmp_path / "r.onnx"), "--calib", str(tmp_path / "calib.npz"), "-o", str(out),
                       "--method", "percentile", "--percentile", "99.9", "--keep-float", "Softmax", "stack3/add")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"cglow: wrote {out}: 21 ops quantized to int8, 2 kept in float (Add, Softmax), "
                                    f"weights ") and result.stdout.count("\n") == 1
    before, after = map(int, result.stdout.split("weights ")[1].split(" bytes")[0].split(" -> "))
    assert before == sum(numpy_helper.to_array(t).nbytes for t in model.graph.initializer)
    assert before / 4.5 < after < before / 3   # int8 weights, with scales and int32 biases
    qdq = onnx.load(str(out))
    onnx.checker.check_model(qdq, full_check=True)
    assert Counter(n.op_type for n in qdq.graph.node)["QuantizeLinear"] > 10


def assert_one_line_error(result: subprocess.CompletedProcess, message: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cglow: error: ") and message in lines[0], result.stderr


def test_cli_errors_are_one_line_and_write_nothing(tmp_path):
    model = zoo.build("kws")
    onnx.save(model, tmp_path / "k.onnx")
    np.savez(tmp_path / "calib.npz", x=samples(model, 2, seed=0))
    np.savez(tmp_path / "wrong.npz", x=samples(model, 2, seed=0)[:, :, :, :20])
    (tmp_path / "bad.npz").write_bytes(b"not a zip at all")
    model_file, calib = str(tmp_path / "k.onnx"), str(tmp_path / "calib.npz")
    out = str(tmp_path / "q.onnx")
    cases = [(["quantize", model_file, "-o", out], "--calib INPUTS.npz"),
             (["quantize", model_file, "--calib", str(tmp_path / "bad.npz"), "-o", out], "not a readable .npz"),
             (["quantize", model_file, "--calib", str(tmp_path / "wrong.npz"), "-o", out], "expected float32 samples"),
             (["quantize", model_file, "--calib", calib, "-o", out, "--method", "median"], "'median'"),
             (["quantize", model_file, "--calib", calib, "-o", out, "--method", "percentile", "--percentile", "x"],
              "--percentile x"),
             (["quantize", model_file, "--calib", calib, "-o", out, "--method", "percentile", "--percentile", "101"],
              "percentile 101.0"),
             (["quantize", model_file, "--calib", calib, "-o", out, "--percentile", "99"], "--method percentile"),
             (["quantize", model_file, "--calib", calib, "-o", out, "--keep-float", "Nope"], "'Nope'"),
             (["quantize", str(tmp_path / "none.onnx"), "--calib", calib, "-o", out], "no such file"),
             (["emit", model_file, "-o", str(tmp_path / "k.c"), "--int8"], "--calib INPUTS.npz"),
             (["emit", model_file, "-o", str(tmp_path / "k.c"), "--int8", "--calib", str(tmp_path / "bad.npz")],
              "not a readable .npz"),
             (["emit", model_file, "-o", str(tmp_path / "k.c"), "--calib", calib], "only with --int8")]
    for args, message in cases:
        assert_one_line_error(cglow_cmd(*args), message)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.npz", "calib.npz", "k.onnx", "wrong.npz"]


def test_cli_emit_int8_quantizes_in_memory(tmp_path):
    model = zoo.build("kws")
    onnx.save(model, tmp_path / "k.onnx")
    np.savez(tmp_path / "calib.npz", x=samples(model, 4, seed=0))
    result = cglow_cmd("emit", str(tmp_path / "k.onnx"), "-o", str(tmp_path / "k.c"), "--int8",
                       "--calib", str(tmp_path / "calib.npz"), "--method", "entropy")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("cglow: quantized the model in memory: 21 ops quantized to int8")
    assert Path(tmp_path / "k.c").is_file() and Path(tmp_path / "k.h").is_file()
