"""TFLite's 8-bit UNIDIRECTIONAL_SEQUENCE_LSTM (8x8 -> 16: int8 input, weights and output state, int16 cell state
and gates), a step as LiteRT's integer kernel computes it (lstm_eval.cc, LstmStepInteger8x8_16, with the scales
of its Prepare), ported and measured bit for bit against it.

Each gate: the step input's product with its weights plus the effective bias (the bias less the input's zero point
times the weights' row sums) requantized into int16 Q3.12 by MultiplyByQuantizedMultiplier (input scale x weights
scale / 2^-12) and saturated; the output state's product (its zero point folded alike) requantized the same way,
added and saturated; then gemmlowp's int16 logistic (input, forget, output gates) or tanh (cell gate). The cell
state, int16 at a power-of-two scale 2^s: c' = f c / 2^15 + i g / 2^(30 + s) (IntLstmCell; CIFG: i = 1 - f),
clipped to the quantized cell_clip. The output state: o tanh(c') (c' read as Q(15 + s)) requantized by
2^-30 / the hidden intermediate's scale, plus its zero point, into int8. The effective scales are formed in
float32 as the Prepare forms them; the kernel takes tanh whatever the fused activation says. Layer normalization,
peepholes and projection are not supported yet."""
from __future__ import annotations

import math

import numpy as np

from ...errors import CglowError
from ..ir import TensorType
from .arith import quantize_multiplier
from .build import Build
from .lstm_inputs import (BIASES, CELL_STATE, GATES, INPUT_WEIGHTS, LAYER_NORMS, OUTPUT_STATE, PEEPHOLES, PROJECTION,
                          RECURRENT_WEIGHTS, gates)

F32 = np.float32
Q3_12 = F32(2.0 ** -12)  # the gates' scale before their activation (no layer normalization)
I16, I32 = np.iinfo(np.int16), np.iinfo(np.int32)


class IntCell:
    """The weights, effective biases and scales of one 8-bit LSTM operator, and its step."""

    def __init__(self, b: Build, cells: int, size: int, outputs: int):
        self.b, self.cells = b, cells
        self.gates = gates(b)
        extras = [name for name, i in (("layer normalization", LAYER_NORMS + 1), ("peepholes", PEEPHOLES["f"]),
                                       ("a projection", PROJECTION)) if b.has(i)]
        if extras:
            raise CglowError(f"{b.op.describe()}: 8-bit LSTM with {' and '.join(extras)} is not supported yet")
        if len(b.op.intermediates) != 5:
            raise CglowError(f"{b.op.describe()}: an 8-bit LSTM takes its hidden state's scale from its 5 intermediate "
                             f"tensors; the file gives {len(b.op.intermediates)}")
        sx, zx = self._params(0, np.int8)
        sh, zh = self._params(OUTPUT_STATE, np.int8)
        hidden = b.model.tensors[b.op.intermediates[4]].quant
        if hidden is None:
            raise CglowError(f"{b.op.describe()}: its hidden intermediate tensor has no scale and zero point")
        self.scale_exponent = self._cell_exponent()
        self.products: dict[str, list[tuple[str, str, int, int]]] = {}  # per gate, the input's and the state's
        for g in self.gates:
            k = GATES.index(g)
            bias = b.weights(BIASES + k).astype(np.int64) if b.has(BIASES + k) else np.zeros(cells, np.int64)
            self.products[g] = [self._product(INPUT_WEIGHTS + k, size, sx, zx, bias),
                                self._product(RECURRENT_WEIGHTS + k, outputs, sh, zh, 0)]
        scale = F32(2.0 ** -15 / float(F32(hidden.scale[0])) * 2.0 ** -15)  # in double, stored as float
        self.hidden = (quantize_multiplier(float(scale)), int(hidden.zero[0]))
        clip = F32(b.option("CellClip") or 0.0)
        self.clip = int(min(max(clip / F32(2.0 ** self.scale_exponent), -32768.0), 32767.0)) if clip > 0 else 0

    def _params(self, i: int, dtype) -> tuple[F32, int]:
        q = self.b.quant(i)
        if self.b.tensor(i).dtype != dtype or q.axis is not None:
            raise CglowError(f"{self.b.op.describe()}: '{self.b.tensor(i).name}' must be {np.dtype(dtype).name}, "
                             f"quantized per tensor")
        return F32(q.scale[0]), int(q.zero[0])

    def _product(self, i: int, columns: int, scale: F32, zero: int, bias) -> tuple[str, str, int, int]:
        """Weights input i's constants and requantization: the weights, the effective bias (bias less the zero
        point of what they multiply times their row sums), the multiplier and shift of their scale times that
        one's over Q3.12."""
        b = self.b
        data, (weights_scale, weights_zero) = b.weights(i), self._params(i, np.int8)
        if data.shape != (self.cells, columns) or weights_zero:
            raise CglowError(f"{b.op.describe()}: the weights '{b.tensor(i).name}' must be [{self.cells}, {columns}] "
                             f"with zero point 0, they are {list(data.shape)}, {weights_zero}")
        effective = (bias - zero * data.astype(np.int64).sum(axis=1)).astype(np.int32)
        return (b.const("weights", data), b.const("effective_bias", effective),
                *quantize_multiplier(float(weights_scale * scale / Q3_12)))

    def _cell_exponent(self) -> int:
        """The cell state's scale as a power of two (CheckedLog2), at most 2^-9, as the kernel requires."""
        scale, zero = self._params(CELL_STATE, np.int16)
        exponent = math.log2(float(scale))
        if zero or abs(exponent - round(exponent)) >= 1e-3 or round(exponent) > -9:
            raise CglowError(f"{self.b.op.describe()}: the cell state must be int16 at a power-of-two scale of at "
                             f"most 2^-9 with zero point 0")
        return round(exponent)

    def _gate(self, g: str, x: str, h: str) -> str:
        """Gate g's pre-activation, saturated int16 Q3.12: the input's requantized product, then the output
        state's added to it (MatrixBatchVectorMultiplyAccumulate, twice)."""
        b, shape = self.b, (self.b.types[x].shape[0], self.cells)
        tflite = dict(transA=0, transB=1, a_zero=0, b_zero=0, y_zero=0, rounding="tflite")
        (wx, bx, mx, sx), (wh, bh, mh, sh) = self.products[g]
        projected = b.add("IntGemm", [x, wx, bx], dict(tflite, mult=mx, shift=sx, lo=int(I16.min), hi=int(I16.max)),
                          out_type=TensorType(np.dtype(np.int16), shape))
        recurrent = b.add("IntGemm", [h, wh, bh], dict(tflite, mult=mh, shift=sh, lo=int(I32.min), hi=int(I32.max)),
                          out_type=TensorType(np.dtype(np.int32), shape))
        total = b.add("Add", [recurrent, b.add("Cast", [projected], {"to": 6})])  # 6: int32
        bounds = [b.const(n, np.array(v, np.int32)) for n, v in (("min", I16.min), ("max", I16.max))]
        return b.add("Cast", [b.add("Clip", [total] + bounds)], {"to": 5})  # 5: int16

    def _activated(self, g: str, x: str, h: str) -> str:
        pre = self._gate(g, x, h)
        return self.b.add("IntTanh" if g == "c" else "IntLogistic", [pre], {"integer_bits": 3},
                          out_type=self.b.types[pre])

    def step(self, x: str, h: str, c: str) -> tuple[str, str]:
        """One step of input x [batch, input] from output state h and cell state c: the new ones."""
        b = self.b
        f, g = self._activated("f", x, h), self._activated("c", x, h)
        i = [self._activated("i", x, h)] if "i" in self.gates else []
        lo, hi = (-self.clip, self.clip) if self.clip > 0 else (int(I16.min), int(I16.max))
        c = b.add("IntLstmCell", [f, c, g] + i, {"shift": 30 + self.scale_exponent, "lo": lo, "hi": hi},
                  out_type=b.types[c])
        o = self._activated("o", x, h)
        t = b.add("IntTanh", [c], {"integer_bits": 15 + self.scale_exponent}, out_type=b.types[c])
        (mult, shift), zero = self.hidden
        h = b.add("IntMul", [o, t], dict(a_zero=0, b_zero=0, mult=mult, shift=shift, y_zero=zero, lo=-128, hi=127,
                                         rounding="tflite"), out_type=b.types[h])
        return h, c
