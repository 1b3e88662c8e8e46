"""How much RAM a model needs, against what its ONNX node order needs: the floors and the arena (the
HTML report, cglow/tools/report.py, draws them).

A floor is the peak, over a sequence of steps, of the bytes of activation buffers alive at one step (graph
inputs and outputs included, weights excluded). The naive floor is the ONNX file's own node order with
every node output a buffer of its own (what a perfect packer reaches with no in-place, views or
reordering); the schedule floor is the same peak over cglow's instruction list.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import onnx

from ..compiler import CompiledModel, compile_model
from ..graph import passes as graph_passes
from ..graph.ir import Graph
from ..instr.liveness import alive, floor, lifetimes
from ..options import Options
from ..stages import Stages


@dataclass(frozen=True)
class Span:
    """A buffer alive from step `first` to step `last` (inclusive)."""
    label: str                 # the ONNX tensor (untrusted text)
    kind: str                  # "input", "output", "arena", or "node" (a node output, for the naive floor)
    first: int
    last: int
    size: int                  # bytes
    offset: int | None = None  # byte offset in the arena; None for the caller's buffers


@dataclass(frozen=True)
class Step:
    index: int
    kernel: str                # the primitive: map, reduce, gemm, conv, pool, gather
    node: str                  # the ONNX node it was made for (untrusted text)
    alive: int                 # bytes of activation buffers alive during this instruction


@dataclass(frozen=True)
class MemoryReport:
    naive_floor: int
    schedule_floor: int
    arena_bytes: int           # NET_ARENA_BYTES
    io_bytes: int              # the input and output buffers the caller provides outside the arena
    peak: int                  # the first instruction where the schedule floor is reached
    buffers: tuple[Span, ...]  # every activation buffer of the program, in buffer id order
    steps: tuple[Step, ...]

    @property
    def ram_bytes(self) -> int:
        return self.arena_bytes + self.io_bytes


def naive_spans(graph: Graph) -> list[Span]:
    """Graph inputs from the start, node outputs from their node, each until its last consumer (graph
    outputs until the end); constants excluded."""
    end = max(len(graph.nodes) - 1, 0)
    birth = {name: (0, "input") for name in graph.inputs}
    last: dict[str, int] = {}
    for i, node in enumerate(graph.nodes):
        birth.update((o, (i, "node")) for o in node.outputs if o)
        last.update((n, i) for n in node.inputs if n)
    last.update((n, end) for n in graph.outputs)
    return [Span(name, kind, first, max(first, last.get(name, first)),
                 graph.types[name].size * graph.types[name].dtype.itemsize)
            for name, (first, kind) in birth.items() if name not in graph.consts]


def schedule_spans(compiled: CompiledModel) -> list[Span]:
    """The allocator's lifetimes with the graph inputs and outputs among them (an input alive from the start,
    an output until the end), at their exact sizes."""
    prog = compiled.program
    return [Span(b.label, b.kind, iv.first, iv.last, b.nbytes, compiled.plan.offsets.get(b.id))
            for iv in lifetimes(prog, 1, io=True) for b in (prog.buffer(iv.buf),)]


def analyze(compiled: CompiledModel) -> MemoryReport:
    """The floors and the arena of a model compile_model compiled (it keeps the graph it imported)."""
    spans = schedule_spans(compiled)
    live = alive(spans, max(len(compiled.program.instrs), 1))
    steps = tuple(Step(i, instr.primitive, instr.node, live[i])
                  for i, instr in enumerate(compiled.program.instrs))
    io_bytes = sum(s.size for s in spans if s.offset is None)
    return MemoryReport(floor(naive_spans(model_graph(compiled.imported))), max(live), compiled.plan.size,
                        io_bytes, live.index(max(live)), tuple(spans), steps)


def model_graph(imported: Graph) -> Graph:
    """The model's own graph: as imported (constants folded) with its dead nodes dropped, before the graph
    optimizations: its ops are the model's, and its naive floor is the one of the ONNX node order with
    BatchNorm unfused."""
    return graph_passes.eliminate_dead(imported)


def analyze_model(model: str | Path | onnx.ModelProto, name: str = "net",
                  shapes: dict[str, tuple[int, ...]] | None = None,
                  options: Options = Options(), stages: Stages = Stages()) -> tuple[CompiledModel, MemoryReport]:
    """Compile the model (`stages` runs each step) and analyze it."""
    compiled = compile_model(model, name, shapes, options, stages=stages)
    return compiled, analyze(compiled)
