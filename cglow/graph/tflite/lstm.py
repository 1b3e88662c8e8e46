"""UNIDIRECTIONAL_SEQUENCE_LSTM, unrolled over its static sequence, step by step: float32 ones into ONNX nodes
here (hybrid ones, float32 with int8 input and recurrent weights, with hybrid.py's products), 8-bit ones into
cglow's integer ops (lstm_int8.py). A float step is computed as LiteRT's float kernel
does (lstm_eval.cc, LstmStepFloat): each gate of i, f, c, o (TFLite's order) is its input projection plus the
recurrent one of the last output state, plus peephole x cell state for i, f (the old cell state) and o (the new
one), then layer normalized if the model has coefficients (the bias added after the normalization, else
before), and activated: sigmoid for i, f, o, the fused activation for c. The cell state c' = f c + i g (CIFG,
no input gate: i = 1 - f) is clipped to +-cell_clip, the output h = o act(c') projected (plus bias) and clipped
to +-proj_clip when the model says so. The output state and cell state are variable tensors: a sequence starts
from what the last invocation left, and leaves its last h and c (Build.assign).

The ONNX LSTM node has no CIFG, projection, layer normalization nor TFLite's clips, so the step is built of
primitives: a Gemm of the step's input over all gates (the input projection), one of the output state with
that projection as its C, and the gates' maps."""
from __future__ import annotations

import numpy as np

from ...errors import CglowError
from . import hybrid
from .build import Build, float_activation, translator
from .lstm_inputs import (BIASES, CELL_STATE, GATES, INPUT_WEIGHTS, LAYER_NORMS, OUTPUT_STATE, PEEPHOLES, PROJECTION,
                          PROJECTION_BIAS, RECURRENT_WEIGHTS, extras, gates, rows)
from .lstm_int8 import IntCell

EPSILON = 1e-8  # LiteRT's normalization constant (kLayerNormEpsilon)


def _clip(b: Build, value: str, bound: float) -> str:
    if not bound:
        return value
    lo, hi = (b.const(n, np.array(v, np.float32)) for n, v in (("min", -bound), ("max", bound)))
    return b.add("Clip", [value, lo, hi])


class _Cell:
    """The weights of one LSTM operator, and its step."""

    def __init__(self, b: Build, cells: int, size: int, outputs: int):
        self.b, self.cells = b, cells
        self.gates = gates(b)
        peephole, norm = extras(b, self.gates)
        self.peephole = {g: b.value(PEEPHOLES[g]) for g in peephole}
        self.norm = {g: b.value(LAYER_NORMS + GATES.index(g)) for g in norm}
        self.bias = {g: b.value(BIASES + GATES.index(g)) for g in self.gates if b.has(BIASES + GATES.index(g))}
        self.hybrid = b.tensor(RECURRENT_WEIGHTS + 1).dtype == np.int8  # int8 weights, float activations
        if self.hybrid and (self.peephole or b.has(PROJECTION)):
            raise CglowError(f"{b.op.describe()}: a hybrid LSTM (int8 weights) with peepholes or a projection is not "
                             f"supported")
        self.recurrent = self._weights(RECURRENT_WEIGHTS, outputs, "recurrent_weights")
        self.input = self._weights(INPUT_WEIGHTS, size, "input_weights")
        self.act = b.activation()
        self.biases = None if self.norm else b.const("biases", self._stacked(BIASES, None))

    def _stacked(self, first: int, columns: int | None) -> np.ndarray:
        """The gates' weights [cells, columns] (or biases [cells], zeros where a gate has none) one after the
        other, in the order of self.gates, float32 (int8 in a hybrid LSTM)."""
        shape = (self.cells,) if columns is None else (self.cells, columns)
        b = self.b
        parts = [b.weights(first + GATES.index(g)) if b.has(first + GATES.index(g)) else np.zeros(shape, np.float32)
                 for g in self.gates]
        for part in parts:
            if part.shape != shape:
                raise CglowError(f"{b.op.describe()}: a gate's weights are {list(part.shape)}, expected {list(shape)}")
        return np.concatenate(parts) if columns and self.hybrid else np.concatenate(parts).astype(np.float32)

    def _weights(self, first: int, columns: int, name: str) -> tuple[str, np.ndarray | None]:
        """The gates' stacked weights (a constant every step reads), and in a hybrid LSTM the scale of each row (its
        gate's)."""
        weights = self.b.const(name, self._stacked(first, columns))
        if not self.hybrid:
            return weights, None
        scales = [hybrid.weight_scales(self.b, self.cells, 0, False, first + GATES.index(g)) for g in self.gates]
        if any(s.size != 1 for s in scales):
            raise CglowError(f"{self.b.op.describe()}: LiteRT's hybrid LSTM takes one scale for each gate's weights")
        return weights, np.repeat(np.concatenate(scales), self.cells)

    def _product(self, x: str, weights, bias: list[str]) -> str:
        """x [batch, columns] times the stacked weights transposed, plus the bias if given: a Gemm, or LiteRT's
        hybrid product (x quantized per row at run time)."""
        data, scales = weights
        if scales is None:
            return self.b.add("Gemm", [x, data] + bias, {"transB": 1})
        return hybrid.gemm(self.b, x, data, scales, bias)

    def projection(self, x: str) -> str:
        """A step's input projection [batch, gates x cells], the biases in it unless each gate is normalized
        (then they come after). Step by step: one step's projection alive, not the whole sequence's."""
        return self._product(x, self.input, [self.biases] if self.biases else [])

    def _gate(self, pre: str, g: str, c: str, act: str) -> str:
        """Gate g of the pre-activations: its peephole (with cell state c), normalization and activation."""
        b, k = self.b, self.gates.index(g)
        value = rows(b, pre, k * self.cells, self.cells)
        if g in self.peephole:
            value = b.add("Add", [value, b.add("Mul", [c, self.peephole[g]])])
        if self.norm:
            value = b.add("LayerNormalization", [value, self.norm[g]] + ([self.bias[g]] if g in self.bias else []),
                          {"axis": -1, "epsilon": EPSILON})
        return float_activation(b, value, act)

    def step(self, x: str, h: str, c: str) -> tuple[str, str]:
        """One step of input x [batch, input] from output state h and cell state c: the new ones."""
        b = self.b
        pre = self._product(h, self.recurrent, [self.projection(x)]) if not self.hybrid else \
            b.add("Add", [self.projection(x), self._product(h, self.recurrent, [])])  # LiteRT's order
        f = self._gate(pre, "f", c, "SIGMOID")
        if "i" in self.gates:
            i = self._gate(pre, "i", c, "SIGMOID")
        else:
            i = b.add("Sub", [b.const("one", np.array(1, np.float32)), f])
        g = self._gate(pre, "c", c, self.act)
        c = _clip(b, b.add("Add", [b.add("Mul", [f, c]), b.add("Mul", [i, g])]), b.option("CellClip") or 0.0)
        o = self._gate(pre, "o", c, "SIGMOID")
        h = b.add("Mul", [o, float_activation(b, c, self.act)])
        if b.has(PROJECTION):
            bias = [b.value(PROJECTION_BIAS)] if b.has(PROJECTION_BIAS) else []
            h = _clip(b, b.add("Gemm", [h, b.value(PROJECTION)] + bias, {"transB": 1}), b.option("ProjClip") or 0.0)
        return h, c


@translator("UNIDIRECTIONAL_SEQUENCE_LSTM")
def _lstm(b: Build, op) -> None:
    x = b.tensor(0)
    kinds = (x.dtype.name, b.tensor(2).dtype.name, b.tensor(-1).dtype.name)
    if kinds not in (("float32",) * 3, ("int8",) * 3, ("float32", "int8", "float32")):
        raise CglowError(f"{op.describe()}: float32, int8 and hybrid (float32 with int8 weights) "
                         f"UNIDIRECTIONAL_SEQUENCE_LSTM are supported, not input {kinds[0]}, weights {kinds[1]}, "
                         f"output {kinds[2]}")
    if b.option("DiagonalRecurrentTensors"):
        raise CglowError(f"{op.describe()}: diagonal recurrent weights are not supported")
    if len(x.shape) != 3:
        raise CglowError(f"{op.describe()}: the input must be 3-D, it is {list(x.shape)}")
    time_major = bool(b.option("TimeMajor"))
    steps, batch = x.shape[:2] if time_major else x.shape[1::-1]
    cells, size = b.weights(2).shape
    outputs = b.weights(PROJECTION).shape[0] if b.has(PROJECTION) else cells
    for i, shape in ((OUTPUT_STATE, (batch, outputs)), (CELL_STATE, (batch, cells))):
        if b.tensor(i).shape != shape:
            raise CglowError(f"{op.describe()}: input {i} ('{b.tensor(i).name}') is {list(b.tensor(i).shape)}, "
                             f"expected {list(shape)}")
    cell = (IntCell if x.dtype == np.int8 else _Cell)(b, cells, size, outputs)
    seq = b.value(0) if time_major else b.transpose(b.value(0), (1, 0, 2))
    h, c, ys = b.state(OUTPUT_STATE), b.state(CELL_STATE), []
    for t in range(steps):
        h, c = cell.step(b.add("Reshape", [rows(b, seq, t, 1, axis=0), b.shape_const(batch, size)]), h, c)
        ys.append(b.add("Reshape", [h, b.shape_const(1, batch, outputs)]))
    b.assign(OUTPUT_STATE, h)
    b.assign(CELL_STATE, c)
    y = b.add("Concat", ys, {"axis": 0}) if steps > 1 else ys[0]
    b.finish(y if time_major else b.transpose(y, (1, 0, 2)))
