"""Capacities lowered by the user (`--capacity NAME=N`, Options.capacities): a value of run-time length
(TensorType.counted: NonZero's, Compress's, Unique's, NonMaxSuppression's) stored at N entries along its counted dim
rather than at the most its op can give (graph/rules/selection.py). The capacity belongs to the node that computes
the value: naming it, or a value it reaches through Cast or Identity (a graph output), lowers every value of
run-time length of that node and of the Casts and Identities after it (Unique's Y, indices and counts share one
count). The count stays the real one (lower/ops/selection.py), which may then exceed the capacity."""
from __future__ import annotations

from dataclasses import replace

from ..errors import CglowError
from .ir import Graph, Node
from .onnx_import import PADDING_KEPT


def lower_capacities(graph: Graph, capacities: tuple[tuple[str, int], ...]) -> Graph:
    """The graph with the capacities (name, N) lowered, each checked: a value of run-time length, N at most the
    capacity the model gives it, one N per node."""
    producers = {name: node for node in graph.nodes for name in node.outputs if name}
    counted = {name for name in producers if graph.types[name].counted is not None}
    chosen: dict[Node, tuple[str, int]] = {}
    for name, n in capacities:
        if name not in counted:
            known = name in producers or name in graph.inputs or name in graph.consts
            what = f"'{name}' ({graph.types[name]}) has a static length" if known else \
                f"the model has no tensor '{name}'"
            raise CglowError(f"--capacity {name}={n}: {what}; {_counted_outputs(graph)}")
        t = graph.types[name]
        if n > t.shape[t.counted]:
            raise CglowError(f"--capacity {name}={n}: above the capacity the model gives '{name}' ({t}), "
                             f"{t.shape[t.counted]}")
        node = _origin(name, producers, counted)
        other, m = chosen.setdefault(node, (name, n))
        if m != n:
            raise CglowError(f"--capacity {other}={m} and {name}={n}: both are computed by {node.describe()}, "
                             f"whose values of run-time length share one count; give them one capacity")
    lowered: dict[str, int] = {}
    for node in graph.nodes:  # in topological order: a Cast or an Identity after the value it passes on
        n = chosen[node][1] if node in chosen else next((lowered[i] for i in node.inputs if i in lowered), None)
        if n is not None:
            lowered.update((name, n) for name in node.outputs if name in counted)
    types = dict(graph.types)
    for name, n in lowered.items():
        t = types[name]
        types[name] = replace(t, shape=t.shape[:t.counted] + (n,) + t.shape[t.counted + 1:])
    return replace(graph, types=types)


def _origin(name: str, producers: dict[str, Node], counted: set[str]) -> Node:
    """The node that computes the value of run-time length `name` passes on (through Cast and Identity)."""
    node = producers[name]
    while node.op in PADDING_KEPT:
        node = producers[next(i for i in node.inputs if i in counted)]
    return node


def _counted_outputs(graph: Graph) -> str:
    """The graph outputs of run-time length, as an error message lists them."""
    named = [f"'{name}' ({graph.types[name]})" for name in graph.outputs if graph.types[name].counted is not None]
    return f"its outputs of run-time length: {', '.join(named)}" if named else "it has no output of run-time length"
