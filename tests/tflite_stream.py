"""What the streaming-operator tests share: a streaming model under construction (Stream: SVDF and LSTM layers,
float32 or int8), two keyword spotters, inputs for several invocations, and the comparison with LiteRT over
consecutive invocations of one interpreter, the state carried from one to the next: on the host, or under QEMU
on a Cortex-M4 with a net_reset between two streams."""
from __future__ import annotations

import numpy as np

import cglow
from cglow.tools import cross, host
from cglow.options import Options
from tests.tflite_file import TFLiteWriter, run_litert_sequence
from tests.util import need_target

RUNS = 6  # invocations: more than an SVDF's memory, so that its oldest frames drop out
SVDF_FRAMES, LSTM_FRAMES = (1, 1, 40, 1), (1, 5, 10)  # the spotters' inputs
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
             act: str = "TANH", hybrid: bool = False, asymmetric: bool = False, f16_states: bool = False) -> int:
        """A float UNIDIRECTIONAL_SEQUENCE_LSTM reading x ([batch, time, input], or [time, batch, input]); returns
        its output sequence. `hybrid`: its input and recurrent weights int8 (dynamic range quantization), the
        inputs of their products quantized at run time, asymmetric or symmetric. `f16_states`: its states written
        by DEQUANTIZE operators from float16 zeros, as TensorFlow's converter writes them with float16 weights."""
        shape, w, rng = self.shapes[x], self.w, self.rng
        (steps, batch), size = (shape[:2] if time_major else shape[1::-1]), shape[2]
        outputs = projection or cells

        def const(name: str, dims, present: bool = True, scale: float = 0.5, int8: bool = False) -> int:
            data = (rng.standard_normal(dims) * scale).astype(np.float32)
            if not present:
                return -1
            if not int8:
                return w.tensor(name, dims, np.float32, data)
            step = float(np.abs(data).max()) / 127
            return w.tensor(name, dims, np.int8, np.round(data / step).astype(np.int8), scale=step)
        inputs = [x]
        inputs += [const(f"input_to_{g}", [cells, size], g != "input" or not cifg, int8=hybrid) for g in GATES]
        inputs += [const(f"recurrent_to_{g}", [cells, outputs], g != "input" or not cifg, int8=hybrid) for g in GATES]
        inputs += [const(f"cell_to_{g}", [cells], peephole and (g != "input" or not cifg)) for g in PEEPHOLES]
        inputs += [const(f"{g}_bias", [cells], g != "input" or not cifg) for g in GATES]
        inputs += [const("projection", [outputs, cells], projection > 0), const("projection_bias", [outputs],
                                                                                 projection > 0)]
        for name, dims in (("output_state", [batch, outputs]), ("cell_state", [batch, cells])):
            inputs.append(w.tensor(name, dims, np.float32, variable=True))
            if f16_states:
                zeros = w.tensor(f"{name}_zeros", dims, np.float16, np.zeros(dims, np.float16))
                w.op("DEQUANTIZE", [zeros], [inputs[-1]])
        inputs += [const(f"{g}_norm", [cells], layer_norm and (g != "input" or not cifg), 0.3) for g in GATES]
        y = self.value("lstm", [steps, batch, outputs] if time_major else [batch, steps, outputs])
        w.op("UNIDIRECTIONAL_SEQUENCE_LSTM", inputs, [y], {"fused_activation_function": act, "cell_clip": cell_clip,
                                                           "proj_clip": proj_clip, "time_major": time_major,
                                                           "asymmetric_quantize_inputs": asymmetric})
        return y

    def lstm8(self, x: int, cells: int, cifg: bool = False, cell_clip: float = 0.0, hidden_zero: int = -3,
              time_major: bool = False, peephole: bool = False, layer_norm: bool = False, projection: int = 0,
              proj_clip: float = 0.0, peephole_scale: float = 0.0, sparse_forget: bool = False) -> int:
        """An int8 UNIDIRECTIONAL_SEQUENCE_LSTM (TFLite's 8x8 -> 16: int16 cell state at 2^-11, the hidden
        intermediate at 1/128) reading x; returns its outputs. Without a projection the output state has the
        hidden intermediate's scale and zero point. The optional tensors quantized as TFLite's quantizer does:
        int16 peephole weights and layer normalization coefficients symmetric over their range, the gates' biases
        then at the coefficients' scale / 2^10, int16 gate intermediates (at Q3.12 without normalization), int8
        symmetric projection weights with an int32 bias at their scale times the hidden state's. peephole_scale:
        the peephole weights' scale instead (a power of two makes their requantization land on ties).
        sparse_forget: the forget gate's weights all zero but its first input weight (1), so that its rows are
        nearly constant (with layer normalization, variances below 1)."""
        shape, w, rng = self.shapes[x], self.w, self.rng
        (steps, batch), size = (shape[:2] if time_major else shape[1::-1]), shape[2]
        outputs = projection or cells
        hidden = dict(scale=1 / 128, zero_point=hidden_zero)
        state = dict(scale=1 / 40, zero_point=4) if projection else hidden

        def present(g: str) -> bool:
            return g != "input" or not cifg

        def weights(name: str, rows: int, columns: int, present: bool) -> int:
            data = rng.integers(-127, 128, (rows, columns)).astype(np.int8)
            if sparse_forget and name.endswith("forget"):
                data = np.zeros_like(data)
                data[0, 0] = name.startswith("input")
            return w.tensor(name, [rows, columns], np.int8, data, scale=float(rng.uniform(0.005, 0.03))) \
                if present else -1

        def symmetric(name: str, real: np.ndarray, dtype, scale: float = 0.0) -> int:
            scale = scale or float(np.max(np.abs(real))) / np.iinfo(dtype).max
            t = w.tensor(name, list(real.shape), dtype, np.round(real / scale).astype(dtype), scale=scale)
            self.scales[t] = scale
            return t
        inputs = [x] + [weights(f"input_to_{g}", cells, size, present(g)) for g in GATES]
        inputs += [weights(f"recurrent_to_{g}", cells, outputs, present(g)) for g in GATES]
        inputs += [symmetric(f"cell_to_{g}", rng.uniform(-0.6, 0.6, cells), np.int16, peephole_scale)
                   if peephole and present(g) else -1 for g in PEEPHOLES]
        norms = [symmetric(f"{g}_norm", rng.uniform(0.2, 1.5, cells), np.int16) if layer_norm and present(g) else -1
                 for g in GATES]
        if layer_norm:
            inputs += [symmetric(f"{g}_bias", rng.uniform(-1, 1, cells), np.int32, self.scales[n] / 1024)
                       if present(g) else -1 for g, n in zip(GATES, norms)]
        else:
            inputs += [w.tensor(f"{g}_bias", [cells], np.int32, rng.integers(-3000, 3000, cells).astype(np.int32),
                                scale=1e-4) if present(g) else -1 for g in GATES]
        if projection:
            inputs.append(symmetric("projection", rng.normal(0, 0.3, (outputs, cells)), np.int8))
            inputs.append(symmetric("projection_bias", rng.uniform(-0.5, 0.5, outputs), np.int32,
                                    self.scales[inputs[-1]] * hidden["scale"]))
        else:
            inputs += [-1, -1]
        inputs += [w.tensor("output_state", [batch, outputs], np.int8, **state, variable=True),
                   w.tensor("cell_state", [batch, cells], np.int16, scale=2.0 ** -11, zero_point=0, variable=True)]
        inputs += norms
        intermediates = [w.tensor(f"gate_{g}", [0], np.int16, zero_point=0,
                                  scale=float(rng.uniform(2e-4, 2e-3)) if layer_norm else 2.0 ** -12) for g in GATES]
        intermediates.append(w.tensor("hidden", [0], np.int8, **hidden))
        y = self.value("lstm", [steps, batch, outputs] if time_major else [batch, steps, outputs], state["scale"],
                       state["zero_point"])
        w.op("UNIDIRECTIONAL_SEQUENCE_LSTM", inputs, [y], {"fused_activation_function": "TANH", "cell_clip": cell_clip,
                                                           "proj_clip": proj_clip, "time_major": time_major},
             intermediates=intermediates)
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

    def probabilities(self, logits: int, classes: int) -> int:
        """A keyword spotter's head: the logits (dequantized when 8-bit) through a float SOFTMAX."""
        if self.int8:
            real = self.w.tensor("logits_float", [1, classes], np.float32)
            self.w.op("DEQUANTIZE", [logits], [real])
            logits = real
        probs = self.w.tensor("probabilities", [1, classes], np.float32)
        self.w.op("SOFTMAX", [logits], [probs], {"beta": 1.0})
        return probs

    def build(self, x: int, *outputs: int) -> bytes:
        return self.w.build([x], list(outputs))


def svdf_spotter(int8: bool) -> bytes:
    """A streaming spotter, one frame of 40 features an invocation (SVDF_FRAMES): a convolution over the frame, two
    SVDF layers (memories of 8 and 4 frames), a dense layer and a float softmax; its outputs are the probabilities
    and the logits (int8 ones to the bit)."""
    s = Stream(int8, seed=5)
    x = s.value("frame", list(SVDF_FRAMES), scale=0.1, zero=0)
    conv = s.weighted("CONV_2D", x, [8, 1, 5, 1], [1, 1, 18, 8], scale=0.05, padding="VALID", stride_w=2,
                      stride_h=1, fused_activation_function="RELU")
    flat = s.value("flat", [1, 144], scale=0.05, zero=0)
    s.w.op("RESHAPE", [conv, s.w.tensor("shape", [2], np.int32, np.array([1, 144], np.int32))], [flat])
    h = s.svdf(s.svdf(flat, 16, 1, 8), 16, 2, 4)
    logits = s.weighted("FULLY_CONNECTED", h, [12, 16], [1, 12], scale=0.3)
    return s.build(x, s.probabilities(logits, 12), logits)


def lstm_spotter(int8: bool) -> bytes:
    """A streaming spotter over chunks of 5 frames of 10 features (LSTM_FRAMES): a dense layer on each frame, an
    LSTM whose states carry from chunk to chunk, and a dense layer with a float softmax over the chunk's outputs;
    its outputs are the probabilities and the logits."""
    s = Stream(int8, seed=6)
    x = s.value("chunk", list(LSTM_FRAMES), scale=0.1, zero=0)
    rows = s.weighted("FULLY_CONNECTED", x, [16, 10], [5, 16], fused_activation_function="RELU")
    seq = s.value("frames", [1, 5, 16], zero=0)
    s.w.op("RESHAPE", [rows, s.w.tensor("shape", [3], np.int32, np.array([1, 5, 16], np.int32))], [seq])
    y = s.lstm8(seq, 12) if int8 else s.lstm(seq, 12, peephole=True)
    logits = s.weighted("FULLY_CONNECTED", y, [12, 60], [1, 12], scale=0.2)
    return s.build(x, s.probabilities(logits, 12), logits)


def frames(shape, int8: bool, seed: int = 1, runs: int = RUNS) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if int8:
        return [rng.integers(-128, 128, shape).astype(np.int8) for _ in range(runs)]
    return [rng.standard_normal(shape).astype(np.float32) for _ in range(runs)]


def same(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    """One invocation's outputs: float32 within 1e-5, integers to the bit."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        if g.dtype == np.float32:
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
        else:
            np.testing.assert_array_equal(g, w)


def agree(model: bytes, inputs: list[np.ndarray], tmp_path, options: Options = Options()) -> host.HostModel:
    """cglow's outputs equal LiteRT's at every invocation of one interpreter; returns the built model."""
    path = tmp_path / "model.tflite"
    path.write_bytes(model)
    net = host.build(cglow.compile_model(path, options=options))
    for x, want in zip(inputs, run_litert_sequence(model, [[x] for x in inputs])):
        same(net(x), want)
    return net


def agree_under_qemu(model: bytes, inputs: list[np.ndarray], reset_at: int, tmp_path) -> None:
    """The model's C on a Cortex-M4 under QEMU, one image calling net_run on each input in turn and net_reset
    before invocation `reset_at` (from 0): each invocation's outputs equal those of one LiteRT interpreter over
    the inputs before `reset_at` and of a new one (its state zero) from there on."""
    target = need_target("cortex-m4")
    path = tmp_path / "model.tflite"
    path.write_bytes(model)
    compiled = cglow.compile_model(path, options=Options(target=target.tiles))
    runs = [[x] for x in inputs]
    image = cross.build_image(compiled, runs[0], target, then=runs[1:], resets=[reset_at])
    got = cross.run_image(image, compiled, target, count=False).invocations
    want = run_litert_sequence(model, runs[:reset_at]) + run_litert_sequence(model, runs[reset_at:])
    assert len(got) == len(want) == len(inputs)
    for g, w in zip(got, want):
        same(g, w)
