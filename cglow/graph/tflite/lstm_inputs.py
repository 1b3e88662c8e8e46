"""The inputs of TFLite's LSTM operators by index, and the graph pieces both LSTM cells (lstm.py's float one,
lstm_int8.py's integer one) build with."""
from __future__ import annotations

from .build import Build

GATES = "ifco"                                     # TFLite's order
INPUT_WEIGHTS, RECURRENT_WEIGHTS, BIASES, LAYER_NORMS = 1, 5, 12, 20  # the inputs of gate i, then f, c, o
PEEPHOLES = {"i": 9, "f": 10, "o": 11}  # cell_to_*_weights: the cell gate has none
PROJECTION, PROJECTION_BIAS, OUTPUT_STATE, CELL_STATE = 16, 17, 18, 19


def rows(b: Build, value: str, first: int, count: int, axis: int = 1) -> str:
    """value[..., first:first + count] along axis."""
    return b.add("Slice", [value, b.shape_const(first), b.shape_const(first + count), b.shape_const(axis)])


def gates(b: Build) -> str:
    """The gates the operator has: all four, or without the input gate (CIFG: no input weights)."""
    return GATES if b.has(INPUT_WEIGHTS) else GATES[1:]
