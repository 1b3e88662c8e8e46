"""What the streaming-operator tests share: a streaming model under construction (Stream: SVDF and LSTM layers,
float32 or int8), inputs for several invocations, and the comparison with LiteRT over consecutive invocations of
one interpreter, the state carried from one to the next."""
from __future__ import annotations

import numpy as np

import cglow
from cglow import host
from cglow.options import Options
from tests.tflite_file import TFLiteWriter, run_litert_sequence

RUNS = 6  # invocations: more than an SVDF's memory, so that its oldest frames drop out
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
              time_major: bool = False, peephole: bool = False) -> int:
        """An int8 UNIDIRECTIONAL_SEQUENCE_LSTM (TFLite's 8x8 -> 16: int16 cell state at 2^-11, the output state
        and the hidden intermediate at the output's scale and zero point) reading x; returns its outputs."""
        shape, w, rng = self.shapes[x], self.w, self.rng
        (steps, batch), size = (shape[:2] if time_major else shape[1::-1]), shape[2]

        def weights(name: str, columns: int, present: bool) -> int:
            data = rng.integers(-127, 128, (cells, columns)).astype(np.int8)
            return w.tensor(name, [cells, columns], np.int8, data, scale=float(rng.uniform(0.005, 0.03))) \
                if present else -1
        inputs = [x] + [weights(f"input_to_{g}", size, g != "input" or not cifg) for g in GATES]
        inputs += [weights(f"recurrent_to_{g}", cells, g != "input" or not cifg) for g in GATES]
        inputs += [w.tensor(f"cell_to_{g}", [cells], np.int16, np.ones(cells, np.int16), scale=1e-3)
                   if peephole and (g != "input" or not cifg) else -1 for g in PEEPHOLES]
        inputs += [w.tensor(f"{g}_bias", [cells], np.int32, rng.integers(-3000, 3000, cells).astype(np.int32),
                            scale=1e-4) if g != "input" or not cifg else -1 for g in GATES] + [-1, -1]
        quant = dict(scale=1 / 128, zero_point=hidden_zero)
        inputs += [w.tensor("output_state", [batch, cells], np.int8, **quant, variable=True),
                   w.tensor("cell_state", [batch, cells], np.int16, scale=2.0 ** -11, zero_point=0, variable=True)]
        inputs += [-1] * 4
        intermediates = [w.tensor(f"gate_{g}", [0], np.int16, scale=2.0 ** -12, zero_point=0) for g in GATES]
        intermediates.append(w.tensor("hidden", [0], np.int8, **quant))
        y = self.value("lstm", [steps, batch, cells] if time_major else [batch, steps, cells], 1 / 128, hidden_zero)
        w.op("UNIDIRECTIONAL_SEQUENCE_LSTM", inputs, [y], {"fused_activation_function": "TANH", "cell_clip": cell_clip,
                                                           "time_major": time_major}, intermediates=intermediates)
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
