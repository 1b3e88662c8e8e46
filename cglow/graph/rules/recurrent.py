"""Shape rules of the recurrent ops RNN, GRU and LSTM, and the attribute checks their lowering shares."""
from __future__ import annotations

import numpy as np

from ...errors import CglowError
from ..ir import Node, TensorType
from ..registry import F32, Args, require_float

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
DEFAULT_ACTIVATIONS = {"RNN": ("tanh",), "GRU": ("sigmoid", "tanh"), "LSTM": ("sigmoid", "tanh", "tanh")}
ACTIVATIONS = ("sigmoid", "tanh", "relu")  # the ones without alpha or beta
DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}


def directions(node: Node) -> int:
    direction = node.attr("direction", "forward")
    if direction not in DIRECTIONS:
        raise CglowError(f"{node.describe()}: unknown direction '{direction}'")
    return DIRECTIONS[direction]


def activations(node: Node) -> list[tuple[str, ...]]:
    """The activation names (f, g[, h]) of each direction, lower case."""
    default = DEFAULT_ACTIVATIONS[node.op]
    dirs = directions(node)
    names = tuple(a.lower() for a in node.attr("activations", default * dirs))
    if len(names) != len(default) * dirs:
        raise CglowError(f"{node.describe()}: {len(names)} activations given, {len(default) * dirs} expected")
    unknown = sorted(set(names) - set(ACTIVATIONS))
    if unknown:
        raise CglowError(f"{node.describe()}: activation {', '.join(unknown)} is not supported (supported: "
                         f"Sigmoid, Tanh, Relu)")
    return [names[d * len(default):(d + 1) * len(default)] for d in range(dirs)]


def recurrent(args: Args) -> list[TensorType]:
    node = args.node
    require_float(args, 0, 1, 2, 3, 5, 6, 7)
    if node.attr("clip") is not None:
        raise CglowError(f"{node.describe()}: the clip attribute is not supported")
    if node.attr("input_forget", 0):
        raise CglowError(f"{node.describe()}: input_forget=1 is not supported")
    layout = node.attr("layout", 0)
    x = args.shape(0)
    if layout not in (0, 1) or len(x) != 3:
        raise CglowError(f"{node.describe()}: X must be 3-D and layout 0 or 1")
    seq, batch = x[layout], x[1 - layout]
    dirs, gates = directions(node), GATES[node.op]
    activations(node)  # checks them
    hidden = node.attr("hidden_size", args.shape(2)[-1])
    y = (seq, dirs, batch, hidden) if layout == 0 else (batch, seq, dirs, hidden)
    state = (dirs, batch, hidden) if layout == 0 else (batch, dirs, hidden)
    expected = {1: (dirs, gates * hidden, x[2]), 2: (dirs, gates * hidden, hidden), 3: (dirs, 2 * gates * hidden),
                5: state, 6: state, 7: (dirs, 3 * hidden)}
    for i, shape in expected.items():
        if args.has(i) and args.shape(i) != shape:
            raise CglowError(f"{node.describe()}: input {i} ('{node.inputs[i]}') has shape {args.shape(i)}, "
                             f"expected {shape}")
    if args.has(4) and np.any(args.const(4, "sequence_lens") != seq):
        raise CglowError(f"{node.describe()}: sequence_lens shorter than the sequence ({seq}) are not supported")
    return [TensorType(F32, y), TensorType(F32, state), TensorType(F32, state)][:len(node.outputs)]
