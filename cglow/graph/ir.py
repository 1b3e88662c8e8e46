"""The typed high-level graph: static shapes, dtypes and constant data, in topological order."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
import math
from typing import Any

import numpy as np


@dataclass(frozen=True)
class TensorType:
    """An element type and a static shape. A value whose length along one dim is known only at run time (NonZero's,
    Unique's...) has `counted`, that dim: its shape holds the most there can be (the capacity), and the value comes
    with a run-time count of the entries along that dim that hold the result; the rest are zero."""
    dtype: np.dtype
    shape: tuple[int, ...]
    counted: int | None = None

    @property
    def size(self) -> int:
        return math.prod(self.shape)  # Python integers: a product of huge dims cannot wrap around

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __str__(self) -> str:
        dims = tuple(f"<={n}" if d == self.counted else n for d, n in enumerate(self.shape))
        return f"{self.dtype.name}{shape_text(dims)}"


def shape_text(shape) -> str:
    """A shape as the messages, dumps and reports write it: [1,3,224,224]."""
    return "[" + ",".join(map(str, shape)) + "]"


@dataclass(frozen=True)
class Node:
    op: str
    name: str
    inputs: tuple[str, ...]     # "" marks an omitted optional input
    outputs: tuple[str, ...]
    attrs: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def attr(self, key: str, default: Any = None) -> Any:
        return self.attrs.get(key, default)

    def describe(self) -> str:
        return f"{self.op} node '{self.name}'"


@dataclass(frozen=True)
class State:
    """Values kept between runs (a TFLite variable tensor): `value` is read like an input, holding at each run's
    start what the last run left; `update`, computed by the nodes, is what this run leaves. Before the first run
    every element is `initial` (LiteRT starts an int8 variable at its zero point, any other at zero)."""
    value: str
    update: str
    initial: int = 0


@dataclass(frozen=True)
class Graph:
    name: str
    opset: int
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    types: dict[str, TensorType]
    consts: dict[str, np.ndarray]
    nodes: tuple[Node, ...]
    source: str = ""
    io_quant: dict[str, tuple[float, int]] = field(default_factory=dict)  # 8-bit input or output: scale, zero point
    states: tuple[State, ...] = ()

    def with_nodes(self, nodes, **changes) -> "Graph":
        return replace(self, nodes=tuple(nodes), **changes)

    @property
    def results(self) -> tuple[str, ...]:
        """The values read after a run, whose names the passes keep: the outputs and the states' updates."""
        return self.outputs + tuple(s.update for s in self.states)

    def consumers(self) -> dict[str, list[Node]]:
        users: dict[str, list[Node]] = {}
        for node in self.nodes:
            for name in node.inputs:
                if name:
                    users.setdefault(name, []).append(node)
        return users
