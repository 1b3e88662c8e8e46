"""What the import shares to compile a control-flow node (If, Loop, Scan) as copies of its subgraphs: a Step, the
nodes that take the node's place and what follows them once they are typed; the copy of a subgraph with its values
renamed apart; and the bound on the nodes that unrolling may copy into one model."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import onnx

from ..errors import CglowError
from .functions import renamed_node
from .limits import read_tensor

UNROLL_LIMIT = 4096  # the most nodes that unrolled loop bodies may add to one model


@dataclass
class Step:
    """The nodes to import next in a control-flow node's place (in order), the constants they read, and what
    follows once they are typed (`then(consts, types)`, the next Step; None: the node is done)."""
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    values: dict[str, np.ndarray] = field(default_factory=dict)
    then: Callable[[dict, dict], Step] | None = None


class Budget:
    """What one model's control flow may cost at import: the bytes of a subgraph's initializers (max_memory), and
    the nodes that unrolling copies (UNROLL_LIMIT, counted over the whole model, nested loops included)."""

    def __init__(self, max_memory: int):
        self.max_memory, self.unrolled = max_memory, 0

    def unroll(self, nodes: int, described: str, what: str) -> None:
        """Count `nodes` more copied nodes for `described`; refused beyond UNROLL_LIMIT."""
        self.ensure(nodes, described, what)
        self.unrolled += nodes

    def fits(self, nodes: int) -> bool:
        """Whether `nodes` more copied nodes stay within UNROLL_LIMIT."""
        return self.unrolled + nodes <= UNROLL_LIMIT

    def ensure(self, nodes: int, described: str, what: str) -> None:
        """Refuse `described` when `nodes` more copied nodes (`what`: how many iterations of how many nodes) would
        go beyond UNROLL_LIMIT."""
        if self.unrolled + nodes > UNROLL_LIMIT:
            raise CglowError(f"{described}: unrolled, {what} would take the model's copied loop bodies beyond "
                             f"{UNROLL_LIMIT} nodes; beyond that bound a Loop runs as a loop in C only with a "
                             f"constant trip count and, when it has a condition input, a condition that stays true")


def copied(graph: onnx.GraphProto, prefix: str, bound: dict[str, str],
           budget: Budget) -> tuple[list[onnx.NodeProto], dict[str, np.ndarray], Callable[[str], str]]:
    """A subgraph's nodes in its node's place: its inputs read the values `bound` to them, the values it makes (its
    nodes' outputs, its initializers) are named after `prefix`, and what it reads from around it keeps its name
    (in its own subgraphs too); with its initializers' values, and the renaming (which names its outputs)."""
    inner = {t.name for t in graph.initializer} | {o for n in graph.node for o in n.output if o}

    def renamed(name: str) -> str:
        return bound[name] if name in bound else prefix + name if name in inner else name
    values = {prefix + t.name: read_tensor(t, f"tensor '{t.name}'", budget.max_memory) for t in graph.initializer}
    nodes = [renamed_node(n, renamed, f"{prefix}{n.name or f'{n.op_type}.{j}'}") for j, n in enumerate(graph.node)]
    return nodes, values, renamed
