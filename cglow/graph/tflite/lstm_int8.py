"""TFLite's 8-bit UNIDIRECTIONAL_SEQUENCE_LSTM (8x8 -> 16: int8 input, weights and output state, int16 cell state
and gates), a step as LiteRT's integer kernel computes it (lstm_eval.cc, LstmStepInteger8x8_16, with the scales
of its Prepare), ported and measured bit for bit against it.

Each gate: the step input's product with its weights plus the effective bias (the bias less the input's zero point
times the weights' row sums) requantized into int16 by MultiplyByQuantizedMultiplier (input scale x weights scale
over the gate's scale: Q3.12, or with layer normalization the gate's intermediate tensor's) and saturated; the
output state's product (its zero point folded alike) requantized the same way, added and saturated; with
peepholes, the cell state times the gate's int16 weights, requantized (2^s x their scale over the gate's), added
and saturated (the input and forget gates take the old cell state, the output gate the new one). With layer
normalization the gate is normalized, weighted by its int16 coefficients, its bias added (then the bias is not
in the products' effective biases) and requantized into Q3.12 (IntLayerNorm: ApplyLayerNorm). Then gemmlowp's
int16 logistic (input, forget, output gates) or tanh (cell gate). The cell state, int16 at a power-of-two scale
2^s: c' = f c / 2^15 + i g / 2^(30 + s) (IntLstmCell; CIFG: i = 1 - f), clipped to the quantized cell_clip. The
hidden state o tanh(c') (c' read as Q(15 + s)) requantized by 2^-30 / the hidden intermediate's scale into int8:
the output state plus the hidden zero point; with a projection, less it (as the kernel writes it), then
multiplied by the int8 projection weights plus the effective bias (the bias plus the hidden zero point times the
weights' row sums), requantized by weights scale x hidden scale / output state scale plus the output state's
zero point, and clipped to the quantized proj_clip (the output's scale; about zero, whatever the zero point).
The effective scales are formed in float32 (or double, stored as float) as the Prepare forms them; the kernel
takes tanh whatever the fused activation says."""
from __future__ import annotations

import math

import numpy as np

from ...errors import CglowError
from ..ir import TensorType
from .arith import quantize_multiplier
from .build import Build
from .lstm_inputs import (BIASES, CELL_STATE, GATES, INPUT_WEIGHTS, LAYER_NORMS, OUTPUT_STATE, PEEPHOLES, PROJECTION,
                          PROJECTION_BIAS, RECURRENT_WEIGHTS, extras, gates)

F32 = np.float32
Q3_12 = F32(2.0 ** -12)  # the gates' scale before their activation (no layer normalization)
I8, I16, I32 = np.iinfo(np.int8), np.iinfo(np.int16), np.iinfo(np.int32)
TFLITE = dict(a_zero=0, b_zero=0, rounding="tflite")  # an integer op's operands without zero points, TFLite's rounding


class IntCell:
    """The weights, effective biases and scales of one 8-bit LSTM operator, and its step."""

    def __init__(self, b: Build, cells: int, size: int, outputs: int):
        self.b, self.cells = b, cells
        self.gates = gates(b)
        peephole, norm = extras(b, self.gates)
        if peephole and b.has(PROJECTION) and outputs != cells:
            raise CglowError(f"{b.op.describe()}: 8-bit LSTM with peepholes and a projection to another width than "
                             f"the cells' is not supported (LiteRT's kernel applies the peepholes over {outputs} "
                             f"values, not {cells})")
        if len(b.op.intermediates) != 5:
            raise CglowError(f"{b.op.describe()}: an 8-bit LSTM takes its hidden state's scale from its 5 intermediate "
                             f"tensors; the file gives {len(b.op.intermediates)}")
        sx, zx = self._params(0, np.int8)
        sh, zh = self._params(OUTPUT_STATE, np.int8)
        cell_scale, cell_zero = self._params(CELL_STATE, np.int16)
        self.scale_exponent = self._cell_exponent(cell_scale, cell_zero)
        self.products: dict[str, list[tuple[str, str, int, int]]] = {}  # per gate, the input's and the state's
        self.peephole: dict[str, tuple[str, int, int]] = {}  # per gate: weights, multiplier, shift
        self.norm: dict[str, tuple[str, str, int, int, int]] = {}  # coefficients, bias, multiplier, shift, guard
        for g in self.gates:
            k = GATES.index(g)
            gate_scale = self._intermediate(k)[0] if norm else Q3_12
            bias = self._bias(BIASES + k, cells)
            self.products[g] = [self._product(INPUT_WEIGHTS + k, size, sx, zx, 0 if norm else bias, gate_scale),
                                self._product(RECURRENT_WEIGHTS + k, outputs, sh, zh, 0, gate_scale)]
            if g in peephole:
                weights, scale = self._vector(PEEPHOLES[g], "peephole")
                factor = F32(2.0 ** self.scale_exponent * float(scale) / float(gate_scale))  # double, stored as float
                self.peephole[g] = (weights, *quantize_multiplier(float(factor)))
            if norm:
                coefficients, scale = self._vector(LAYER_NORMS + k, "norm")
                self.norm[g] = (coefficients, b.const("norm_bias", bias.astype(np.int32)),
                                *quantize_multiplier(float(scale)), max(1, int(F32(10000) * scale)))
        hidden_scale, hidden_zero = self._intermediate(4)
        factor = F32(2.0 ** -15 / float(hidden_scale) * 2.0 ** -15)  # in double, stored as float
        self.hidden = (quantize_multiplier(float(factor)), hidden_zero)
        clip = F32(b.option("CellClip") or 0.0)
        self.clip = int(min(max(clip / cell_scale, -32768.0), 32767.0)) if clip > 0 else 0
        self.projection = self._projection(cells, outputs, hidden_scale, hidden_zero, sh, zh) \
            if b.has(PROJECTION) else None

    def _params(self, i: int, dtype) -> tuple[F32, int]:
        q = self.b.quant(i)
        if self.b.tensor(i).dtype != dtype or q.axis is not None:
            raise CglowError(f"{self.b.op.describe()}: '{self.b.tensor(i).name}' must be {np.dtype(dtype).name}, "
                             f"quantized per tensor")
        return F32(q.scale[0]), int(q.zero[0])

    def _intermediate(self, k: int) -> tuple[F32, int]:
        """The scale and zero point of intermediate tensor k: the gates' (i, f, c, o) with layer normalization,
        then the hidden state's."""
        t = self.b.model.tensors[self.b.op.intermediates[k]]
        if t.quant is None:
            raise CglowError(f"{self.b.op.describe()}: its intermediate tensor '{t.name}' has no scale and zero point")
        return F32(t.quant.scale[0]), int(t.quant.zero[0])

    def _bias(self, i: int, rows: int) -> np.ndarray:
        """Bias input i as int64 (zeros where the operator has none)."""
        if not self.b.has(i):
            return np.zeros(rows, np.int64)
        data = self.b.weights(i)
        if data.dtype != np.int32 or data.shape != (rows,):
            raise CglowError(f"{self.b.op.describe()}: the bias '{self.b.tensor(i).name}' must be int32 [{rows}], it "
                             f"is {data.dtype.name} {list(data.shape)}")
        return data.astype(np.int64)

    def _weights(self, i: int, shape: tuple[int, ...], dtype) -> tuple[np.ndarray, F32]:
        """Weights input i (per tensor, zero point 0, of that shape) and its scale."""
        data, (scale, zero) = self.b.weights(i), self._params(i, dtype)
        if data.shape != shape or zero:
            raise CglowError(f"{self.b.op.describe()}: the weights '{self.b.tensor(i).name}' must be {list(shape)} "
                             f"with zero point 0, they are {list(data.shape)}, {zero}")
        return data, scale

    def _vector(self, i: int, name: str) -> tuple[str, F32]:
        """An int16 vector of one value per cell (peephole weights, layer normalization coefficients) as a
        constant, and its scale."""
        data, scale = self._weights(i, (self.cells,), np.int16)
        return self.b.const(name, data), scale

    def _product(self, i: int, columns: int, scale: F32, zero: int, bias, gate_scale: F32) -> tuple[str, str, int, int]:
        """Weights input i's constants and requantization: the weights, the effective bias (bias less the zero
        point of what they multiply times their row sums), the multiplier and shift of their scale times that
        one's over the gate's."""
        data, weights_scale = self._weights(i, (self.cells, columns), np.int8)
        effective = (bias - zero * data.astype(np.int64).sum(axis=1)).astype(np.int32)
        return (self.b.const("weights", data), self.b.const("effective_bias", effective),
                *quantize_multiplier(float(weights_scale * scale / gate_scale)))

    def _projection(self, cells: int, outputs: int, hidden_scale: F32, hidden_zero: int, state_scale: F32,
                    state_zero: int) -> tuple[str, str, int, int, int, int]:
        """The projection's weights, effective bias (bias plus the hidden zero point times the weights' row sums),
        multiplier and shift, output zero point (the output state's) and quantized clip (by the output's scale)."""
        data, scale = self._weights(PROJECTION, (outputs, cells), np.int8)
        effective = self._bias(PROJECTION_BIAS, outputs) + hidden_zero * data.astype(np.int64).sum(axis=1)
        clip = F32(self.b.option("ProjClip") or 0.0)
        out_scale = F32(self.b.quant(-1).scale[0])
        quantized = int(min(max(clip / out_scale, -128.0), 127.0)) if clip > 0 else 0
        return (self.b.const("projection", data), self.b.const("projection_bias", effective.astype(np.int32)),
                *quantize_multiplier(float(scale * hidden_scale / state_scale)), state_zero, quantized)

    def _cell_exponent(self, scale: F32, zero: int) -> int:
        """The cell state's scale as a power of two (CheckedLog2), at most 2^-9, as the kernel requires."""
        exponent = math.log2(float(scale))
        if zero or abs(exponent - round(exponent)) >= 1e-3 or round(exponent) > -9:
            raise CglowError(f"{self.b.op.describe()}: the cell state must be int16 at a power-of-two scale of at "
                             f"most 2^-9 with zero point 0")
        return round(exponent)

    def _saturated(self, value: str, term: str) -> str:
        """int16 value plus int32 term, saturated to int16."""
        b = self.b
        total = b.add("Add", [term, b.add("Cast", [value], {"to": 6})])  # 6: int32
        bounds = [b.const(n, np.array(v, np.int32)) for n, v in (("min", I16.min), ("max", I16.max))]
        return b.add("Cast", [b.add("Clip", [total] + bounds)], {"to": 5})  # 5: int16

    def _gate(self, g: str, x: str, h: str, c: str) -> str:
        """Gate g's pre-activation, saturated int16 in Q3.12: the input's requantized product, then the output
        state's added to it (MatrixBatchVectorMultiplyAccumulate, twice), the peephole's (cell state c times
        its weights), all at the gate's scale; then the layer normalization into Q3.12."""
        b, shape = self.b, (self.b.types[x].shape[0], self.cells)
        (wx, bx, mx, sx), (wh, bh, mh, sh) = self.products[g]
        common = dict(TFLITE, transA=0, transB=1, y_zero=0)
        value = b.add("IntGemm", [x, wx, bx], dict(common, mult=mx, shift=sx, lo=int(I16.min), hi=int(I16.max)),
                      out_type=TensorType(np.dtype(np.int16), shape))
        recurrent = b.add("IntGemm", [h, wh, bh], dict(common, mult=mh, shift=sh, lo=int(I32.min), hi=int(I32.max)),
                          out_type=TensorType(np.dtype(np.int32), shape))
        value = self._saturated(value, recurrent)
        if g in self.peephole:
            weights, mult, shift = self.peephole[g]
            value = b.add("IntPeephole", [value, c, weights], dict(mult=mult, shift=shift), out_type=b.types[value])
        if g in self.norm:
            coefficients, bias, mult, shift, guard = self.norm[g]
            value = b.add("IntLayerNorm", [value, coefficients, bias], dict(mult=mult, shift=shift, guard=guard),
                          out_type=b.types[value])
        return value

    def _activated(self, g: str, x: str, h: str, c: str) -> str:
        pre = self._gate(g, x, h, c)
        return self.b.add("IntTanh" if g == "c" else "IntLogistic", [pre], {"integer_bits": 3},
                          out_type=self.b.types[pre])

    def step(self, x: str, h: str, c: str) -> tuple[str, str]:
        """One step of input x [batch, input] from output state h and cell state c: the new ones."""
        b = self.b
        f, g = self._activated("f", x, h, c), self._activated("c", x, h, c)
        i = [self._activated("i", x, h, c)] if "i" in self.gates else []
        lo, hi = (-self.clip, self.clip) if self.clip > 0 else (int(I16.min), int(I16.max))
        c = b.add("IntLstmCell", [f, c, g] + i, {"shift": 30 + self.scale_exponent, "lo": lo, "hi": hi},
                  out_type=b.types[c])
        o = self._activated("o", x, h, c)
        t = b.add("IntTanh", [c], {"integer_bits": 15 + self.scale_exponent}, out_type=b.types[c])
        (mult, shift), zero = self.hidden
        int8 = dict(lo=int(I8.min), hi=int(I8.max))
        hidden = b.add("IntMul", [o, t], dict(TFLITE, **int8, mult=mult, shift=shift,
                                              y_zero=-zero if self.projection else zero),
                       out_type=TensorType(np.dtype(np.int8), b.types[c].shape))
        if not self.projection:
            return hidden, c
        weights, bias, mult, shift, zero, clip = self.projection
        h = b.add("IntGemm", [hidden, weights, bias], dict(TFLITE, **int8, transA=0, transB=1, mult=mult, shift=shift,
                                                           y_zero=zero), out_type=b.types[h])
        if clip:
            h = b.add("Clip", [h] + [b.const(n, np.array(v, np.int8)) for n, v in (("min", -clip), ("max", clip))])
        return h, c
