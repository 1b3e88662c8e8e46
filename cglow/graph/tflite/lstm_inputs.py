"""The inputs of TFLite's LSTM operators by index, and the graph pieces both LSTM cells (lstm.py's float one,
lstm_int8.py's integer one) build with."""
from __future__ import annotations

from ...errors import CglowError
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


def extras(b: Build, have: str) -> tuple[str, str]:
    """Of the gates the operator has (`have`), those with peephole weights and those layer normalized, as LiteRT
    takes them: peepholes for every gate but the cell gate or none, coefficients for every gate or none, and
    neither for an input gate the operator lacks (CIFG)."""
    peephole = "".join(g for g in GATES if g in PEEPHOLES and b.has(PEEPHOLES[g]))
    norm = "".join(g for g in GATES if b.has(LAYER_NORMS + GATES.index(g)))
    if peephole not in ("", have.replace("c", "")) or norm not in ("", have):
        raise CglowError(f"{b.op.describe()}: layer normalization coefficients must be given for every gate or none, "
                         f"peephole weights for every gate but the cell gate or none (not for an input gate the "
                         f"operator lacks: CIFG)")
    return peephole, norm
