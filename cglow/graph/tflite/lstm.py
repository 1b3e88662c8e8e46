"""UNIDIRECTIONAL_SEQUENCE_LSTM (float32), unrolled over its static sequence into ONNX nodes, step by step as
LiteRT's float kernel computes (lstm_eval.cc, LstmStepFloat): each gate of i, f, c, o (TFLite's order) is its
input projection plus the recurrent one of the last output state, plus peephole x cell state for i, f (the
old cell state) and o (the new one), then layer normalized if the model has coefficients (the bias added after
the normalization, else before), and activated: sigmoid for i, f, o, the fused activation for c. The cell state
c' = f c + i g (CIFG, no input gate: i = 1 - f) is clipped to +-cell_clip, the output h = o act(c') projected
(plus bias) and clipped to +-proj_clip when the model says so. The output state and cell state are variable
tensors: a sequence starts from what the last invocation left, and leaves its last h and c (Build.assign).

The ONNX LSTM node has no CIFG, projection, layer normalization nor TFLite's clips, so the step is built of
primitives: a Gemm of the step's input over all gates (the input projection), one of the output state with
that projection as its C, and the gates' maps."""
from __future__ import annotations

import numpy as np

from ...errors import CglowError
from .build import Build, float_activation, translator

GATES = "ifco"                                     # TFLite's order
INPUT_WEIGHTS, RECURRENT_WEIGHTS, BIASES, LAYER_NORMS = 1, 5, 12, 20  # the inputs of gate i, then f, c, o
PEEPHOLES = {"i": 9, "f": 10, "o": 11}  # cell_to_*_weights: the cell gate has none
PROJECTION, PROJECTION_BIAS, OUTPUT_STATE, CELL_STATE = 16, 17, 18, 19
EPSILON = 1e-8  # LiteRT's normalization constant (kLayerNormEpsilon)


def _shape(b: Build, *dims: int) -> str:
    return b.const("shape", np.array(dims, np.int64))


def _rows(b: Build, value: str, first: int, count: int, axis: int = 1) -> str:
    """value[..., first:first + count] along axis."""
    return b.add("Slice", [value, _shape(b, first), _shape(b, first + count), _shape(b, axis)])


def _clip(b: Build, value: str, bound: float) -> str:
    if not bound:
        return value
    lo, hi = (b.const(n, np.array(v, np.float32)) for n, v in (("min", -bound), ("max", bound)))
    return b.add("Clip", [value, lo, hi])


class _Cell:
    """The weights of one LSTM operator, and its step."""

    def __init__(self, b: Build, cells: int, size: int, outputs: int):
        self.b, self.cells = b, cells
        self.gates = GATES[1:] if not b.has(INPUT_WEIGHTS) else GATES  # CIFG: no input gate
        self.peephole = {g: b.value(i) for g, i in PEEPHOLES.items() if b.has(i)}
        self.norm = {g: b.value(LAYER_NORMS + GATES.index(g)) for g in self.gates
                     if b.has(LAYER_NORMS + GATES.index(g))}
        self.bias = {g: b.value(BIASES + GATES.index(g)) for g in self.gates if b.has(BIASES + GATES.index(g))}
        if self.norm and len(self.norm) != len(self.gates) or set(self.peephole) - set(self.gates):
            raise CglowError(f"{b.op.describe()}: layer normalization coefficients must be given for every gate, "
                             f"and no input gate peephole without the input gate (CIFG)")
        self.recurrent = b.const("recurrent_weights", self._stacked(RECURRENT_WEIGHTS, outputs))
        self.input = b.const("input_weights", self._stacked(INPUT_WEIGHTS, size))
        self.act = b.activation()
        self.biases = None if self.norm else b.const("biases", self._stacked(BIASES, None))

    def _stacked(self, first: int, columns: int | None) -> np.ndarray:
        """The gates' weights [cells, columns] (or biases [cells], zeros where a gate has none) one after the
        other, in the order of self.gates."""
        shape = (self.cells,) if columns is None else (self.cells, columns)
        b = self.b
        parts = [b.weights(first + GATES.index(g)) if b.has(first + GATES.index(g)) else np.zeros(shape, np.float32)
                 for g in self.gates]
        for part in parts:
            if part.shape != shape:
                raise CglowError(f"{b.op.describe()}: a gate's weights are {list(part.shape)}, expected {list(shape)}")
        return np.concatenate(parts).astype(np.float32)

    def projection(self, x: str) -> str:
        """A step's input projection [batch, gates x cells], the biases in it unless each gate is normalized
        (then they come after). Step by step: one step's projection alive, not the whole sequence's."""
        return self.b.add("Gemm", [x, self.input] + ([self.biases] if self.biases else []), {"transB": 1})

    def _gate(self, pre: str, g: str, c: str, act: str) -> str:
        """Gate g of the pre-activations: its peephole (with cell state c), normalization and activation."""
        b, k = self.b, self.gates.index(g)
        value = _rows(b, pre, k * self.cells, self.cells)
        if g in self.peephole:
            value = b.add("Add", [value, b.add("Mul", [c, self.peephole[g]])])
        if self.norm:
            value = b.add("LayerNormalization", [value, self.norm[g]] + ([self.bias[g]] if g in self.bias else []),
                          {"axis": -1, "epsilon": EPSILON})
        return float_activation(b, value, act)

    def step(self, x: str, h: str, c: str, cell_clip: float) -> tuple[str, str]:
        """One step of input x [batch, input] from output state h and cell state c: the new ones."""
        b = self.b
        pre = b.add("Gemm", [h, self.recurrent, self.projection(x)], {"transB": 1})
        f = self._gate(pre, "f", c, "SIGMOID")
        if "i" in self.gates:
            i = self._gate(pre, "i", c, "SIGMOID")
        else:
            i = b.add("Sub", [b.const("one", np.array(1, np.float32)), f])
        g = self._gate(pre, "c", c, self.act)
        c = _clip(b, b.add("Add", [b.add("Mul", [f, c]), b.add("Mul", [i, g])]), cell_clip)
        o = self._gate(pre, "o", c, "SIGMOID")
        return b.add("Mul", [o, float_activation(b, c, self.act)]), c


@translator("UNIDIRECTIONAL_SEQUENCE_LSTM")
def _lstm(b: Build, op) -> None:
    x = b.tensor(0)
    if b.tensor(-1).dtype != np.float32 or x.dtype != np.float32 or b.tensor(2).dtype != np.float32:
        raise CglowError(f"{op.describe()}: only float32 UNIDIRECTIONAL_SEQUENCE_LSTM is supported (8-bit and "
                         f"hybrid ones are not yet)")
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
    cell = _Cell(b, cells, size, outputs)
    seq = b.value(0) if time_major else b.transpose(b.value(0), (1, 0, 2))
    h, c, ys = b.state(OUTPUT_STATE), b.state(CELL_STATE), []
    for t in range(steps):
        x_t = b.add("Reshape", [_rows(b, seq, t, 1, axis=0), _shape(b, batch, size)])
        h, c = cell.step(x_t, h, c, b.option("CellClip") or 0.0)
        if b.has(PROJECTION):
            h = b.add("Gemm", [h, b.value(PROJECTION)] + ([b.value(PROJECTION_BIAS)] if b.has(PROJECTION_BIAS) else []),
                      {"transB": 1})
            h = _clip(b, h, b.option("ProjClip") or 0.0)
        ys.append(b.add("Reshape", [h, _shape(b, 1, batch, outputs)]))
    b.assign(OUTPUT_STATE, h)
    b.assign(CELL_STATE, c)
    y = b.add("Concat", ys, {"axis": 0}) if steps > 1 else ys[0]
    b.finish(y if time_major else b.transpose(y, (1, 0, 2)))
