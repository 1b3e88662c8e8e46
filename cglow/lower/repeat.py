"""The lowering of a Repeat node (graph/c_loop.py: a Loop or a Scan beyond the unrolling bound) into one Repeat
instruction (instr/ir.py). Its body graph goes through the graph passes, the lowering and the instruction passes on
its own, then its buffers become buffers of the program around it: its constants and temporaries fresh ones, its
inputs and outputs slots that the Repeat fills and empties each iteration (a scan input's slice copied in, a scan
output's slice copied out, a new loop-carried value copied over the old one), its iteration number the Repeat's
counter, the values it reads from around it their own buffers. The loop-carried values start as copies of their
initial values, and their slots hold the final values after the last iteration."""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

import numpy as np

from ..graph import passes as graph_passes
from ..graph.ir import Graph, Node
from ..instr import passes as instr_passes
from ..instr.expr import Input
from ..instr.ir import Map, Program, Repeat, View, map_views
from .context import Context


def _slice(v: View, axis: int, at: int) -> View:
    """The view v at position `at` of `axis`, that dim dropped."""
    drop = lambda t: t[:axis] + t[axis + 1:]  # noqa: E731
    return View(v.buf, v.offset + at * v.strides[axis], drop(v.shape), drop(v.strides))


def _slot(ctx: Context, body: Program, buf: int, label: str) -> View:
    """A fresh buffer for the body's input or output buffer `buf`, as one flat view."""
    b = body.buffer(buf)
    return ctx.temp((b.size,), label, b.dtype)


def _compiled(graph: Graph, lower: Callable[[Graph], Program]) -> Program:
    """The body's program through the graph passes, the lowering and the instruction passes."""
    for rewrite in graph_passes.PIPELINE:
        graph = rewrite(graph)
    prog = lower(graph)
    for rewrite in instr_passes.PIPELINE:
        prog = rewrite(prog)
    return prog


def lower_repeat(ctx: Context, node: Node, lower: Callable[[Graph], Program]) -> None:
    """A Repeat node as its Repeat instruction, with the copies of the loop-carried values' initial values."""
    graph, trips, n_states = node.attr("body"), node.attr("trips"), node.attr("states")
    body = _compiled(graph, lower)
    counter = ctx.temp((), f"{node.name} iteration", np.int64)
    mapping, body_inputs = {}, list(body.inputs)
    if node.attr("counter"):
        mapping[body_inputs.pop(0)] = counter.buf
    states, slides_in, slides_out, steps, carried = [], [], [], [], []
    for k, (name, buf) in enumerate(zip(node.inputs, body_inputs)):
        slot = _slot(ctx, body, buf, f"{node.name} input {k}")
        mapping[buf] = slot.buf
        if k < n_states:
            ctx.emit(Map(slot, (ctx.view(name).reshape((slot.size,)) or ctx.contiguous(name).reshape((slot.size,)),),
                         Input(0), f"{node.name} initial value {k}"))
            states.append(slot)
        elif k < n_states + len(node.attr("scans_in")):
            axis, back = node.attr("scans_in")[k - n_states]
            outer = ctx.view(name)
            shape = graph.types[graph.inputs[len(graph.inputs) - len(body_inputs) + k]].shape
            slides_in.append((_slice(outer, axis, trips - 1 if back else 0), slot.reshape(shape)))
            steps.append(-outer.strides[axis] if back else outer.strides[axis])
        else:  # read from around the body, the same every iteration
            ctx.emit(Map(slot, (ctx.contiguous(name).reshape((slot.size,)),), Input(0), f"{node.name} input {k}"))
    for k, buf in enumerate(body.outputs):
        slot = _slot(ctx, body, buf, f"{node.name} output {k}")
        mapping[buf] = slot.buf
        if k < n_states:
            carried.append((slot, states[k]))
            continue
        name = node.outputs[k]
        if name:
            axis, back = node.attr("scans_out")[k - n_states]
            outer = ctx.new(name)
            piece = slot.reshape(graph.types[graph.outputs[k]].shape)
            slides_out.append((piece, _slice(outer, axis, trips - 1 if back else 0)))
            steps.append(-outer.strides[axis] if back else outer.strides[axis])
    for b in body.buffers:
        if b.kind == "const":
            mapping[b.id] = ctx.const_view(b.data, b.label, b.dtype).buf
        elif b.kind == "arena":
            mapping[b.id] = ctx.temp((b.size,), b.label, b.dtype).buf
    instrs = tuple(replace(map_views(i, lambda v: replace(v, buf=mapping[v.buf])), value=None) for i in body.instrs)
    ctx.emit(Repeat(counter, instrs, trips, tuple(slides_in), tuple(slides_out), tuple(steps), tuple(carried),
                    node.name))
    for name, slot in zip(node.outputs, states):
        if name:
            ctx.bind(name, slot.reshape(ctx.shape(name)))
