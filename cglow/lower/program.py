"""The graph lowered to an instruction list: each node through the lowering of its op's specification (lower/ops/),
then the copies into the graph outputs and the updates of the state kept between runs."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..errors import CglowError
from ..graph.c_loop import REPEAT
from ..graph.ir import Graph
from ..graph.registry import OPS
from ..instr.expr import Input
from ..instr.ir import Instr, Map, Program, Value, View
from . import ops  # noqa: F401  (declares every op)
from .context import Context
from .repeat import lower_repeat


def lower(graph: Graph) -> Program:
    """The program; its outputs are the graph's, then the count of each graph output of run-time length
    (TensorType.counted), int64, in the order of those outputs."""
    ctx = Context(graph)
    used = set(graph.consumers()) | set(graph.outputs)
    for node in graph.nodes:
        if node.op == REPEAT:
            lower_repeat(ctx, node, lower)
        else:
            OPS[node.op].lower(ctx, node)
        for i, name in enumerate(node.outputs):
            if name in used and name not in ctx.views:
                raise CglowError(f"{node.describe()}: output {i} ('{name}') is not supported (inference only)")
            if name and graph.types[name].counted is not None and name not in ctx.counts:  # a Cast's, an Identity's
                ctx.counts[name] = next(ctx.counts[n] for n in node.inputs if n in ctx.counts)
    outputs = []
    for i, name in enumerate(graph.outputs):
        buf = ctx._buffer("output", graph.types[name].size, name, ctx.dtype(name), i)
        outputs.append(buf)
        out = View.of(buf, graph.types[name].shape)
        ctx.emit(Map(out, (ctx.view(name),), Input(0), f"output {name}", Value(name, out)))
    for name in (n for n in graph.outputs if graph.types[n].counted is not None):
        buf = ctx._buffer("output", 1, f"{name} count", np.dtype(np.int64), len(outputs))
        outputs.append(buf)
        ctx.emit(Map(View.of(buf, ()), (ctx.counts[name],), Input(0), f"count of {name}"))
    for s in graph.states:  # last: every read of the state's old value comes before
        ctx.emit(Map(ctx.views[s.value], (ctx.view(s.update),), Input(0), f"state {s.value}"))
    return Program(graph.name, tuple(ctx.buffers), _with_values(ctx), ctx.inputs, tuple(outputs))


def _with_values(ctx: Context) -> tuple[Instr, ...]:
    """The instructions, the value that a fresh buffer was made for marked on the last one that writes that
    buffer, when it writes the value's whole view."""
    instrs = list(ctx.instrs)
    last = {instr.out.buf: i for i, instr in enumerate(instrs)}
    for buf, name in ctx.named.items():
        i = last.get(buf)
        if i is not None and instrs[i].out == ctx.views.get(name):
            instrs[i] = replace(instrs[i], value=Value(name, instrs[i].out))
    return tuple(instrs)
