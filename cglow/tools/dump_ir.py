"""`cglow emit --dump-ir DIR`: the IR after each stage as text, for debugging the compiler.

One file per stage, numbered in the order they ran: 00-import.txt, then the graph passes, lower, the fusing
instruction passes (instr-NAME), patch-plan (the span, tiles, halo and extra MACs, when there are patches),
the other instruction passes (instr-run_in_patches: the program with a span in tiles), alloc. Names from the
model are data: they appear quoted, control characters escaped, so that every node, buffer and instruction
takes one line."""
from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np

from ..alloc.arena import Plan
from ..alloc.patch_plan import Patched
from ..errors import one_line
from ..graph.ir import Graph, shape_text
from ..instr.expr import Expr
from ..instr.ir import Buffer, Epilogue, Instr, Program, Repeat, Value, View
from ..stages import Observer


class IRDump(Observer):
    """Keeps the text of every Graph, Program, Plan and patch plan a stage produced (the emitted C is the command's
    own output); `files(folder)` names them."""

    def __init__(self):
        self.texts: list[tuple[str, str]] = []
        self.program: Program | None = None   # the one a Plan's buffers belong to

    def done(self, stage: str, result: Any) -> None:
        if isinstance(result, Graph):
            self.texts.append((stage, graph_text(result)))
        elif isinstance(result, Program):
            self.program = result
            self.texts.append((stage, program_text(result)))
        elif isinstance(result, Plan) and self.program is not None:
            self.texts.append((stage, plan_text(result, self.program)))
        elif isinstance(result, Patched):
            self.texts.append((stage, "\n".join(result.lines()) + "\n"))

    def files(self, folder: Path) -> dict[Path, str]:
        return {folder / f"{i:02d}-{stage}.txt": text for i, (stage, text) in enumerate(self.texts)}


def quoted(name: str) -> str:
    return f"'{one_line(name)}'"


def graph_text(graph: Graph) -> str:
    """The graph's inputs, outputs, states (each with the value a run leaves in it) and constants, then one
    line per node: op, name, inputs -> outputs with their types, attributes."""
    def value(name: str) -> str:
        if not name:
            return "-"
        kind = "const " if name in graph.consts else ""
        return f"{quoted(name)} {kind}{graph.types[name]}" if name in graph.types else quoted(name)

    const_bytes = sum(a.nbytes for a in graph.consts.values())
    lines = [f"graph {quoted(graph.name)} opset {graph.opset} from {quoted(graph.source)}",
             *(f"input {value(n)}" for n in graph.inputs),
             *(f"output {value(n)}" for n in graph.outputs),
             *(f"state {value(s.value)} <- {value(s.update)} initial {s.initial}" for s in graph.states),
             f"constants: {len(graph.consts)} ({const_bytes} bytes)",
             f"nodes: {len(graph.nodes)}"]
    for node in graph.nodes:
        attrs = "".join(f" {key}={attribute(a)}" for key, a in sorted(node.attrs.items()))
        lines.append(f"{node.op} {quoted(node.name)}: {', '.join(map(value, node.inputs))} -> "
                     f"{', '.join(map(value, node.outputs))}{attrs}")
    return "\n".join(lines) + "\n"


def attribute(a: Any) -> str:
    if isinstance(a, np.ndarray):
        return f"array {a.dtype.name}{shape_text(a.shape)}"
    text = one_line(repr(a))
    return text if len(text) <= 80 else text[:77] + "..."


def buffer_text(b: Buffer) -> str:
    index = f" {b.index}" if b.kind in ("input", "output") else ""
    return f"b{b.id} {b.kind}{index} {b.dtype.name}[{b.size}] {quoted(b.label)}"


def program_text(prog: Program) -> str:
    """The buffers, then one line per instruction: its primitive, ONNX node and fields, each view as
    b<buffer>+<offset>[<shape>]/<strides>."""
    lines = [f"program {quoted(prog.name)}: {len(prog.buffers)} buffers, {len(prog.instrs)} instructions",
             "buffers:", *(f"  {buffer_text(b)}" for b in prog.buffers), "instructions:"]
    for i, instr in enumerate(prog.instrs):
        lines += instr_lines(i, instr, "  ")
    return "\n".join(lines) + "\n"


def instr_lines(i: int, instr: Instr, indent: str) -> list[str]:
    """The i-th instruction's line; a Repeat's, then each kernel of its iterations below it, indented further
    (with the view that moves each iteration, and by how many elements)."""
    if isinstance(instr, Repeat):
        lines = [f"{indent}{i} repeat {quoted(instr.node)}: trips={instr.trips} out={field_text(instr.out)}"]
        for k, (inner, moving, step) in enumerate(instr.copies()):
            more = instr_lines(k, inner, indent + "    ")
            lines += [more[0] + (f" moving={field_text(moving)} by {step}/iteration" if moving else "")] + more[1:]
        return lines
    parts = [f"{f.name}={field_text(getattr(instr, f.name))}" for f in fields(instr) if f.name != "node"]
    return [f"{indent}{i} {instr.primitive} {quoted(instr.node)}: {' '.join(parts)}"]


def field_text(value: Any) -> str:
    if isinstance(value, View):
        return f"b{value.buf}+{value.offset}{shape_text(value.shape)}/{','.join(map(str, value.strides))}"
    if isinstance(value, Epilogue):
        init = "" if value.init is None else f" init={{{value.init}}}"
        return f"({field_text(value.expr)} {field_text(value.ins)}{init})"
    if isinstance(value, Value):
        return f"{quoted(value.name)}@{field_text(value.view)}"
    if isinstance(value, Expr):  # as C, inputs spelled {i} and the accumulator {acc}
        return repr(str(value))
    if isinstance(value, tuple) and all(isinstance(v, View) for v in value):
        return "(" + " ".join(map(field_text, value)) + ")"
    return repr(value)


def plan_text(plan: Plan, prog: Program) -> str:
    """The arena: one line per buffer in it, by offset: offset, bytes (aligned), lifetime, buffer."""
    lines = [f"arena: {plan.size} bytes, align {plan.align}, {len(plan.intervals)} buffers",
             f"{'offset':>10} {'bytes':>10} {'first':>6} {'last':>6}  buffer"]
    for iv in sorted(plan.intervals, key=lambda iv: (plan.offsets[iv.buf], iv.buf)):
        buffer = buffer_text(prog.buffer(iv.buf))
        lines.append(f"{plan.offsets[iv.buf]:10} {iv.size:10} {iv.first:6} {iv.last:6}  {buffer}")
    return "\n".join(lines) + "\n"
