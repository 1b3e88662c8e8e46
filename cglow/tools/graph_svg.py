"""A picture of a graph for the HTML report: a layered layout computed in linear time.

The graph inputs form the top row, each node sits in the row of its longest path from them, and the
graph outputs form the bottom row. The columns make a grid: each vertex takes the column nearest the mean
of its producers' columns that is right of its row's previous vertex (one sweep from the top). An edge is
a curve from a producer's bottom to a consumer's top; one that skips rows runs down the gap right of the
producer's column instead."""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..graph.ir import Graph

BOX_W, BOX_H, COL_W, ROW_H, PAD = 176, 46, 196, 76, 16


@dataclass(frozen=True)
class Box:
    x: float
    y: float
    kind: str              # "input", "output" or "node"
    op: str                # the op type, or the kind for a graph input or output
    name: str              # the ONNX node or tensor (untrusted text)
    type: str              # the first output's type, e.g. float32[1,64,25,5]
    details: str           # what a tooltip shows: inputs and outputs with their types


@dataclass(frozen=True)
class GraphPicture:
    width: int
    height: int
    boxes: tuple[Box, ...]
    edges: tuple[str, ...]  # SVG path data


def draw_graph(graph: Graph) -> GraphPicture:
    vertices = _vertices(graph)
    last = max(row for row, _, _ in vertices)
    rows: list[list[int]] = [[] for _ in range(last + 1)]
    for v, (row, _, _) in enumerate(vertices):
        rows[row].append(v)
    slot: dict[int, int] = {}   # the column of each vertex
    for members in rows:
        wanted = {v: round(sum(slot[p] for p in vertices[v][1]) / max(len(vertices[v][1]), 1)) for v in members}
        column = -1
        for v in sorted(members, key=lambda v: wanted[v]):
            column = slot[v] = max(column + 1, wanted[v])
    widest = max(slot.values()) + 1
    boxes = tuple(replace(box, x=PAD + slot[v] * COL_W, y=PAD + row * ROW_H)
                  for v, (row, _, box) in enumerate(vertices))
    edges = tuple(edge(boxes[p].x + BOX_W / 2, boxes[p].y + BOX_H, box.x + BOX_W / 2, box.y, row - vertices[p][0] > 1)
                  for box, (row, preds, _) in zip(boxes, vertices) for p in preds)
    return GraphPicture(int(2 * PAD + widest * COL_W), int(2 * PAD + last * ROW_H + BOX_H), boxes, edges)


def _vertices(graph: Graph) -> list[tuple[int, list[int], Box]]:
    """The graph inputs, nodes and graph outputs, each with its row, the vertices it reads and its text."""
    def typed(name: str) -> str:
        kind = "const " if name in graph.consts else ""
        return f"{name}: {kind}{graph.types[name]}" if name in graph.types else name

    producer = {name: i for i, name in enumerate(graph.inputs)}
    vertices = [(0, [], Box(0, 0, "input", "input", name, str(graph.types[name]), typed(name)))
                for name in graph.inputs]
    for node in graph.nodes:
        preds = sorted({producer[n] for n in node.inputs if n in producer})
        row = 1 + max((vertices[p][0] for p in preds), default=0)
        details = f"{node.op} node\ninputs: {', '.join(map(typed, filter(None, node.inputs)))}\n" \
                  f"outputs: {', '.join(map(typed, node.outputs))}"
        first = graph.types.get(node.outputs[0]) if node.outputs else None
        vertices.append((row, preds, Box(0, 0, "node", node.op, node.name, str(first or ""), details)))
        producer.update((o, len(vertices) - 1) for o in node.outputs if o)
    last = 1 + max((row for row, _, _ in vertices), default=0)
    vertices += [(last, [producer[name]] if name in producer else [],
                  Box(0, 0, "output", "output", name, str(graph.types[name]), typed(name))) for name in graph.outputs]
    return vertices


def edge(x1: float, y1: float, x2: float, y2: float, skips: bool) -> str:
    """SVG path data from a producer's bottom (x1, y1) to a consumer's top (x2, y2); an edge that `skips`
    rows runs down a lane right of the producer's column, in the gap between columns."""
    if not skips:
        return f"M{x1:.0f} {y1:.0f}C{x1:.0f} {y1 + ROW_H / 2:.0f} {x2:.0f} {y2 - ROW_H / 2:.0f} {x2:.0f} {y2:.0f}"
    lane, gap = x1 + (BOX_W + COL_W) / 4, (ROW_H - BOX_H) / 2
    return (f"M{x1:.0f} {y1:.0f}C{x1:.0f} {y1 + gap:.0f} {lane:.0f} {y1:.0f} {lane:.0f} {y1 + gap:.0f}"
            f"V{y2 - gap:.0f}C{lane:.0f} {y2:.0f} {x2:.0f} {y2 - gap:.0f} {x2:.0f} {y2:.0f}")
