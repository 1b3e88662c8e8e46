"""Graph-level passes (Graph -> Graph)."""
from __future__ import annotations

from .ir import Graph


def eliminate_dead(graph: Graph) -> Graph:
    """Drop nodes none of whose outputs reach a graph output."""
    needed = set(graph.outputs)
    kept = []
    for node in reversed(graph.nodes):
        if any(o in needed for o in node.outputs):
            kept.append(node)
            needed.update(n for n in node.inputs if n)
    return graph.with_nodes(reversed(kept))


PIPELINE = (eliminate_dead,)
