"""What the graph passes share: who produces and who reads each value, and rewriting nodes one at a
time into a new Graph."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..names import fresh_name
from .ir import Graph, Node, TensorType


class Site:
    """A graph with its producer and reader maps, as a rule sees it."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.readers = graph.consumers()
        self.producer = {o: node for node in graph.nodes for o in node.outputs if o}

    def const(self, name: str) -> np.ndarray | None:
        return self.graph.consts.get(name) if name else None

    def shape(self, name: str) -> tuple[int, ...]:
        return self.graph.types[name].shape

    def sole_reader(self, name: str) -> Node | None:
        """The one node that reads the value, once, if nothing else does (a graph output is read by the caller,
        a state's update by the next run)."""
        readers = self.readers.get(name, [])
        if name in self.graph.results or len(readers) != 1 or readers[0].inputs.count(name) != 1:
            return None
        return readers[0]

    def fresh(self, base: str, taken: set[str]) -> str:
        """A value name the graph does not use, nor `taken` (which receives it)."""
        return fresh_name(base, taken, self.graph.types)

    def rewritten(self, changes: list[tuple[Node, Node | None]], consts: dict[str, np.ndarray] | None = None) -> Graph:
        """The graph with each old node replaced by its new one (None: dropped), and the new constants."""
        new = {id(old): node for old, node in changes}
        nodes = [new.get(id(node), node) for node in self.graph.nodes]
        consts = consts or {}
        types = {**self.graph.types, **{n: TensorType(v.dtype, v.shape) for n, v in consts.items()}}
        return self.graph.with_nodes([n for n in nodes if n is not None], consts={**self.graph.consts, **consts},
                                     types=types)


Rule = Callable[[Site, Node], "Graph | None"]


def rewrite_each(graph: Graph, rule: Rule) -> Graph:
    """Apply the rule at every node in order; after a change, again from the first node it changed (or
    the current one). The rules are local: a change never enables a rule at a node before those it changed."""
    site, i = Site(graph), 0
    while i < len(site.graph.nodes):
        changed = rule(site, site.graph.nodes[i])
        if changed is None:
            i += 1
            continue
        pairs = zip(site.graph.nodes, changed.nodes)
        i = min(i, next((k for k, (old, new) in enumerate(pairs) if old is not new), len(changed.nodes)))
        site = Site(changed)
    return site.graph
