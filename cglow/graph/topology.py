"""The order in which a graph's nodes can run: each tensor has one producer, and no node reads its own
output through a cycle. A graph whose nodes are listed out of order is sorted; a cycle is named."""
from __future__ import annotations

import heapq

import onnx


def node_label(proto: onnx.NodeProto, index: int) -> str:
    """A node's name, or OpType_index for a node without one."""
    return proto.name or f"{proto.op_type}_{index}"


def describe(proto: onnx.NodeProto, index: int) -> str:
    return f"{proto.op_type} node '{node_label(proto, index)}'"


def topological_order(graph: onnx.GraphProto, defined: set[str]) -> tuple[list[int], list[str]]:
    """The node indices in an order where every producer runs before its readers (the file's own order when
    it is one), and the problems: a tensor defined twice (by two nodes, or by a node and a graph input or
    initializer in `defined`), and cycles."""
    problems: list[str] = []
    producer: dict[str, int] = {}
    for i, proto in enumerate(graph.node):
        for name in filter(None, proto.output):
            if name in defined or name in producer:
                first = "a graph input or initializer" if name in defined else describe(graph.node[producer[name]],
                                                                                          producer[name])
                problems.append(f"{describe(proto, i)}: its output '{name}' is also produced by {first}")
            else:
                producer[name] = i
    readers: dict[int, set[int]] = {i: set() for i in range(len(graph.node))}
    waiting = []
    for i, proto in enumerate(graph.node):
        sources = {producer[name] for name in proto.input if name in producer}
        for j in sources:
            readers[j].add(i)
        waiting.append(len(sources))
    ready = [i for i, count in enumerate(waiting) if count == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for j in readers[i]:
            waiting[j] -= 1
            if waiting[j] == 0:
                heapq.heappush(ready, j)
    if len(order) < len(graph.node):
        problems.append("the graph has a cycle: " + " -> ".join(
            describe(graph.node[i], i) for i in _cycle(graph, producer, set(range(len(graph.node))) - set(order))))
    return order, problems


def _cycle(graph: onnx.GraphProto, producer: dict[str, int], stuck: set[int]) -> list[int]:
    """One cycle among the nodes that never became ready, first node repeated at the end: every stuck node
    reads the output of another stuck node, so walking back from producer to producer must loop."""
    path, seen = [], {}
    node = min(stuck)
    while node not in seen:
        seen[node] = len(path)
        path.append(node)
        node = min(producer[n] for n in graph.node[node].input if producer.get(n) in stuck)
    loop = path[seen[node]:]
    return list(reversed(loop + [node]))
