"""The streaming operators SVDF and UNIDIRECTIONAL_SEQUENCE_LSTM against LiteRT's reference kernels over several
consecutive invocations, the state carried from one to the next (8-bit results to the bit, float within 1e-5),
and small keyword spotters built of them."""
from __future__ import annotations

import os

import numpy as np
import pytest

if os.environ.get("CI") == "true":
    import ai_edge_litert  # noqa: F401  (in CI a missing LiteRT is a failure, not a skip)
else:
    pytest.importorskip("ai_edge_litert")

import cglow
from cglow import cross, host
from cglow.errors import CglowError
from cglow.options import Options
from cglow.targets import TARGETS
from tests.tflite_file import TFLiteWriter, run_litert_sequence
from tests.util import need_tool

RUNS = 6  # invocations: more than an SVDF's memory, so that its oldest frames drop out
KINDS = [pytest.param(False, id="float"), pytest.param(True, id="int8")]
GATES = ("input", "forget", "cell", "output")  # TFLite's order
PEEPHOLES = ("input", "forget", "output")


class Stream:
    """A streaming model under construction: float32 tensors, or int8 ones (int16 SVDF states)."""

    def __init__(self, int8: bool, seed: int = 0):
        self.w, self.int8 = TFLiteWriter(), int8
        self.rng = np.random.default_rng(seed)
        self.shapes: dict[int, tuple[int, ...]] = {}
        self.scales: dict[int, float] = {}

    def value(self, name: str, shape, scale: float = 0.05, zero: int = -3) -> int:
        quant = dict(scale=scale, zero_point=zero) if self.int8 else {}
        t = self.w.tensor(name, shape, np.int8 if self.int8 else np.float32, **quant)
        self.shapes[t], self.scales[t] = tuple(shape), scale
        return t

    def svdf(self, x: int, units: int, rank: int, memory: int, act: str = "RELU", bias: bool = True) -> int:
        """An SVDF layer reading x [batch, input]; returns its output [batch, units]."""
        (batch, size), filters, w, rng = self.shapes[x], units * rank, self.w, self.rng
        state_shape = [batch, filters * memory]
        if self.int8:
            wf = w.tensor("weights_feature", [filters, size], np.int8,
                          rng.integers(-127, 128, (filters, size)).astype(np.int8), scale=0.01)
            wt = w.tensor("weights_time", [filters, memory], np.int16,
                          rng.integers(-20000, 20000, (filters, memory)).astype(np.int16), scale=0.0004)
            b = w.tensor("bias", [units], np.int32, rng.integers(-30000, 30000, units).astype(np.int32),
                         scale=0.002 * 0.0004)
            state = w.tensor("state", state_shape, np.int16, scale=0.002, zero_point=0, variable=True)
        else:
            wf = w.tensor("weights_feature", [filters, size], np.float32,
                          (rng.standard_normal((filters, size)) / np.sqrt(size)).astype(np.float32))
            wt = w.tensor("weights_time", [filters, memory], np.float32,
                          rng.standard_normal((filters, memory)).astype(np.float32))
            b = w.tensor("bias", [units], np.float32, rng.standard_normal(units).astype(np.float32))
            state = w.tensor("state", state_shape, np.float32, variable=True)
        y = self.value("svdf", [batch, units])
        w.op("SVDF", [x, wf, wt, b if bias else -1, state], [y], {"rank": rank, "fused_activation_function": act})
        return y

    def lstm(self, x: int, cells: int, projection: int = 0, time_major: bool = False, cifg: bool = False,
             peephole: bool = False, layer_norm: bool = False, cell_clip: float = 0.0, proj_clip: float = 0.0,
             act: str = "TANH") -> int:
        """A float UNIDIRECTIONAL_SEQUENCE_LSTM reading x ([batch, time, input], or [time, batch, input]); returns
        its output sequence."""
        shape, w, rng = self.shapes[x], self.w, self.rng
        (steps, batch), size = (shape[:2] if time_major else shape[1::-1]), shape[2]
        outputs = projection or cells

        def const(name: str, dims, present: bool = True, scale: float = 0.5) -> int:
            data = (rng.standard_normal(dims) * scale).astype(np.float32)
            return w.tensor(name, dims, np.float32, data) if present else -1
        inputs = [x]
        inputs += [const(f"input_to_{g}", [cells, size], g != "input" or not cifg) for g in GATES]
        inputs += [const(f"recurrent_to_{g}", [cells, outputs], g != "input" or not cifg) for g in GATES]
        inputs += [const(f"cell_to_{g}", [cells], peephole and (g != "input" or not cifg)) for g in PEEPHOLES]
        inputs += [const(f"{g}_bias", [cells], g != "input" or not cifg) for g in GATES]
        inputs += [const("projection", [outputs, cells], projection > 0), const("projection_bias", [outputs],
                                                                                 projection > 0)]
        inputs += [w.tensor("output_state", [batch, outputs], np.float32, variable=True),
                   w.tensor("cell_state", [batch, cells], np.float32, variable=True)]
        inputs += [const(f"{g}_norm", [cells], layer_norm and (g != "input" or not cifg), 0.3) for g in GATES]
        y = self.value("lstm", [steps, batch, outputs] if time_major else [batch, steps, outputs])
        w.op("UNIDIRECTIONAL_SEQUENCE_LSTM", inputs, [y], {"fused_activation_function": act, "cell_clip": cell_clip,
                                                           "proj_clip": proj_clip, "time_major": time_major})
        return y

    def weighted(self, op: str, x: int, shape, out_shape, scale: float = 0.05, **options) -> int:
        """CONV_2D or FULLY_CONNECTED over x with random weights [outputs, ...] (int8: per output channel) and bias."""
        n, w, rng = shape[0], self.w, self.rng
        y = self.value(op.lower(), out_shape, scale=scale, zero=0)
        if self.int8:
            scales = rng.uniform(0.002, 0.01, n)
            weights = w.tensor("weights", shape, np.int8, rng.integers(-127, 128, shape).astype(np.int8),
                               scale=list(scales), zero_point=[0] * n)
            bias = w.tensor("bias", [n], np.int32, rng.integers(-500, 500, n).astype(np.int32),
                            scale=list(scales * self.scales[x]), zero_point=[0] * n)
        else:
            weights = w.tensor("weights", shape, np.float32,
                               (rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32))
            bias = w.tensor("bias", [n], np.float32, rng.standard_normal(n).astype(np.float32) * 0.1)
        w.op(op, [x, weights, bias], [y], options)
        return y

    def build(self, x: int, y: int) -> bytes:
        return self.w.build([x], [y])


def frames(shape, int8: bool, seed: int = 1, runs: int = RUNS) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if int8:
        return [rng.integers(-128, 128, shape).astype(np.int8) for _ in range(runs)]
    return [rng.standard_normal(shape).astype(np.float32) for _ in range(runs)]


def agree(model: bytes, inputs: list[np.ndarray], tmp_path, options: Options = Options()) -> host.HostModel:
    """cglow's outputs equal LiteRT's at every invocation of one interpreter; returns the built model."""
    path = tmp_path / "model.tflite"
    path.write_bytes(model)
    net = host.build(cglow.compile_model(path, options=options))
    for x, (want,) in zip(inputs, run_litert_sequence(model, [[x] for x in inputs])):
        (got,) = net(x)
        assert got.dtype == want.dtype and got.shape == want.shape
        if got.dtype == np.float32:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        else:
            np.testing.assert_array_equal(got, want)
    return net


@pytest.mark.parametrize("int8", KINDS)
@pytest.mark.parametrize("batch,units,rank,memory,bias", [(1, 4, 1, 3, True), (2, 3, 2, 4, True),
                                                          (3, 5, 1, 1, False)])
def test_svdf(int8, batch, units, rank, memory, bias, tmp_path):
    s = Stream(int8)
    x = s.value("x", [batch, 7], scale=0.1, zero=5)
    y = s.svdf(x, units, rank, memory, bias=bias)
    agree(s.build(x, y), frames((batch, 7), int8), tmp_path)


@pytest.mark.parametrize("act", ["NONE", "TANH", "RELU6"])
def test_float_svdf_activations(act, tmp_path):
    s = Stream(False, seed=2)
    x = s.value("x", [1, 6])
    agree(s.build(x, s.svdf(x, 4, 2, 5, act=act)), frames((1, 6), False), tmp_path)


@pytest.mark.parametrize("caller_arena", [False, True])
def test_state_resets(caller_arena, tmp_path):
    """After net_reset the model computes as from its first run; with --caller-arena the state is the arena's."""
    s = Stream(True, seed=3)
    x = s.value("x", [1, 8], scale=0.1, zero=0)
    model = s.build(x, s.svdf(x, 4, 1, 3))
    inputs = frames((1, 8), True)
    net = agree(model, inputs, tmp_path, Options(caller_arena=caller_arena))
    assert "NET_STATE_BYTES" in net.compiled.h_source
    net.reset()
    for v, (want,) in zip(inputs, run_litert_sequence(model, [[v] for v in inputs])):
        np.testing.assert_array_equal(net(v)[0], want)


@pytest.mark.parametrize("options", [
    dict(), dict(time_major=True), dict(peephole=True), dict(cifg=True, peephole=True), dict(projection=3),
    dict(projection=3, proj_clip=0.3, cell_clip=0.8), dict(layer_norm=True), dict(layer_norm=True, cifg=True),
    dict(act="RELU")], ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "plain")
def test_float_lstm(options, tmp_path):
    s = Stream(False, seed=4)
    shape = [5, 2, 3] if options.get("time_major") else [2, 5, 3]
    x = s.value("x", shape)
    agree(s.build(x, s.lstm(x, 4, **options)), frames(shape, False, runs=3), tmp_path)


def svdf_spotter(int8: bool) -> bytes:
    """A streaming spotter, one frame of 40 features an invocation: a convolution over the frame, two SVDF layers
    (memories of 8 and 4 frames), a dense layer and a float softmax."""
    s = Stream(int8, seed=5)
    x = s.value("frame", [1, 1, 40, 1], scale=0.1, zero=0)
    conv = s.weighted("CONV_2D", x, [8, 1, 5, 1], [1, 1, 18, 8], scale=0.05, padding="VALID", stride_w=2,
                      stride_h=1, fused_activation_function="RELU")
    flat = s.value("flat", [1, 144], scale=0.05, zero=0)
    s.w.op("RESHAPE", [conv, s.w.tensor("shape", [2], np.int32, np.array([1, 144], np.int32))], [flat])
    h = s.svdf(s.svdf(flat, 16, 1, 8), 16, 2, 4)
    logits = s.weighted("FULLY_CONNECTED", h, [12, 16], [1, 12], scale=0.3)
    if int8:
        real = s.w.tensor("logits_float", [1, 12], np.float32)
        s.w.op("DEQUANTIZE", [logits], [real])
        logits = real
    probs = s.w.tensor("probabilities", [1, 12], np.float32)
    s.w.op("SOFTMAX", [logits], [probs], {"beta": 1.0})
    return s.build(x, probs)


@pytest.mark.parametrize("int8", KINDS)
def test_svdf_keyword_spotter(int8, tmp_path):
    agree(svdf_spotter(int8), frames((1, 1, 40, 1), int8, runs=12), tmp_path)


def test_int8_svdf_spotter_under_qemu(tmp_path):
    """The first invocation (the state zero, in .bss) on a Cortex-M4, to the bit."""
    target = TARGETS["cortex-m4"]
    for tool in target.tools:
        need_tool(tool)
    path = tmp_path / "spotter.tflite"
    path.write_bytes(svdf_spotter(True))
    compiled = cglow.compile_model(path, options=Options(target=target.tiles))
    inputs = frames((1, 1, 40, 1), True, runs=1)
    run = cross.run_image(cross.build_image(compiled, inputs, target), compiled, target, count=False)
    np.testing.assert_allclose(run.outputs[0], run_litert_sequence(path.read_bytes(), [inputs])[0][0],
                               rtol=1e-5, atol=1e-6)


def test_lstm_keyword_spotter(tmp_path):
    """A streaming spotter over chunks of 5 frames of 10 features: a dense layer on each frame, an LSTM whose
    states carry from chunk to chunk, and a dense layer with softmax over the chunk's outputs."""
    s = Stream(False, seed=6)
    x = s.value("chunk", [1, 5, 10])
    rows = s.weighted("FULLY_CONNECTED", x, [16, 10], [5, 16], fused_activation_function="RELU")
    seq = s.value("frames", [1, 5, 16])
    s.w.op("RESHAPE", [rows, s.w.tensor("shape", [3], np.int32, np.array([1, 5, 16], np.int32))], [seq])
    y = s.lstm(seq, 12, peephole=True)
    logits = s.weighted("FULLY_CONNECTED", y, [12, 60], [1, 12])
    probs = s.value("probabilities", [1, 12])
    s.w.op("SOFTMAX", [logits], [probs], {"beta": 1.0})
    agree(s.build(x, probs), frames((1, 5, 10), False, runs=4), tmp_path)


def _int8_lstm() -> bytes:
    w = TFLiteWriter()
    x = w.tensor("x", [1, 2, 3], np.int8, scale=0.1, zero_point=0)
    inputs = [x] + [w.tensor(f"input_to_{g}", [4, 3], np.int8, np.ones((4, 3), np.int8), scale=0.1) for g in GATES]
    inputs += [w.tensor(f"recurrent_to_{g}", [4, 4], np.int8, np.ones((4, 4), np.int8), scale=0.1) for g in GATES]
    inputs += [-1] * 3 + [w.tensor(f"{g}_bias", [4], np.int32, np.ones(4, np.int32), scale=0.01) for g in GATES]
    inputs += [-1, -1, w.tensor("output_state", [1, 4], np.int8, scale=0.1, zero_point=0, variable=True),
               w.tensor("cell_state", [1, 4], np.int16, scale=0.001, variable=True)]
    y = w.tensor("y", [1, 2, 4], np.int8, scale=0.1, zero_point=0)
    w.op("UNIDIRECTIONAL_SEQUENCE_LSTM", inputs, [y], {"fused_activation_function": "TANH"})
    return w.build([x], [y])


def _svdf_state_not_variable() -> bytes:
    w = TFLiteWriter()
    x, y = w.tensor("x", [1, 4], np.float32), w.tensor("y", [1, 2], np.float32)
    weights = [w.tensor(n, [2, k], np.float32, np.ones((2, k), np.float32)) for n, k in (("wf", 4), ("wt", 3))]
    w.op("SVDF", [x, *weights, -1, w.tensor("state", [1, 6], np.float32)], [y], {"rank": 1})
    return w.build([x], [y])


def _int8_svdf_tanh() -> bytes:
    s = Stream(True)
    x = s.value("x", [1, 8])
    return s.build(x, s.svdf(x, 4, 1, 3, act="TANH"))


@pytest.mark.parametrize("model,words", [
    (_int8_lstm, "only float32 UNIDIRECTIONAL_SEQUENCE_LSTM is supported"),
    (_svdf_state_not_variable, "its state input 4 ('state') is not a variable tensor"),
    (_int8_svdf_tanh, "8-bit SVDF takes the fused activation RELU")])
def test_refused_in_one_line(model, words, tmp_path):
    path = tmp_path / "model.tflite"
    path.write_bytes(model())
    with pytest.raises(CglowError) as error:
        cglow.compile_model(path)
    assert words in str(error.value) and "\n" not in str(error.value)
