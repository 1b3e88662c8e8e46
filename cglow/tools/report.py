"""`cglow emit --report plan.html`: one self-contained HTML page (no script, no network) with the memory
figures, the graph after optimization, a table of the kernels and the arena over time, the peak marked."""
from __future__ import annotations

from dataclasses import dataclass

import jinja2

from ..compiler import CompiledModel
from ..graph.ir import shape_text
from ..instr.ir import operands
from ..instr.patches import KEPT
from .graph_svg import BOX_H, BOX_W, draw_graph
from .memory import MemoryReport

SVG_WIDTH, SVG_HEIGHT, MARGIN = 960, 420, 40
ENV = jinja2.Environment(loader=jinja2.PackageLoader("cglow.tools", "templates"), autoescape=True, trim_blocks=True,
                         lstrip_blocks=True, undefined=jinja2.StrictUndefined)


@dataclass(frozen=True)
class Layer:
    """One kernel of the program, as a row of the table."""
    index: int
    kernel: str                # the primitive: map, reduce, gemm, conv, pool, gather
    op: str                    # the op type of the ONNX node it is named after ("" for a copy cglow made)
    node: str                  # that node (untrusted text)
    out_shape: str
    in_shapes: str             # its inputs' (operands of role "in"), not its scratch
    macs: int
    cost: int                  # the time estimate's units (instr/ir.py work()): MACs, else elements
    buffer: str                # the output's buffer (untrusted text)
    offset: str                # its byte offset in the arena, or where it lives when not in the arena
    nbytes: int
    alive: int                 # bytes of activations alive during the kernel


def layers(compiled: CompiledModel, report: MemoryReport) -> list[Layer]:
    prog, plan = compiled.program, compiled.plan
    ops = {node.name: node.op for node in compiled.graph.nodes}
    rows = []
    for step, instr in zip(report.steps, prog.instrs):
        out = prog.buffer(instr.out.buf)
        offset = plan.offsets.get(out.id)
        ins = " ".join(shape_text(v.shape) for role, v in operands(instr) if role == "in")  # not its scratch
        rows.append(Layer(step.index, step.kernel, ops.get(instr.node, ""), instr.node, shape_text(instr.out.shape),
                          ins, instr.macs(), instr.work(), out.label,
                          f"{out.kind} (caller)" if offset is None else str(offset), out.nbytes, step.alive))
    return rows


def render_report(compiled: CompiledModel, report: MemoryReport, title: str) -> str:
    """The page of a model compile_model compiled (its graph is the one it lowered); `report` the memory
    analysis."""
    rows = layers(compiled, report)
    total = sum(row.cost for row in rows) or 1
    return ENV.get_template("plan.html.j2").render(
        title=title, r=report, kib=kib, layers=rows, total_cost=total,
        macs=sum(row.macs for row in rows), weights=compiled.weights_bytes, picture=draw_graph(compiled.graph),
        box_w=BOX_W, box_h=BOX_H, hue=hash_hue, rects=arena_rects(report), margin=MARGIN, width=SVG_WIDTH,
        height=SVG_HEIGHT, peak_x=f"{MARGIN + (report.peak + 0.5) * SVG_WIDTH / max(len(report.steps), 1):.1f}",
        ratio=lambda n: f"{n / report.naive_floor:.2f}" if report.naive_floor else "-",
        patched=patched_band(compiled, report))


def patched_band(compiled: CompiledModel, report: MemoryReport) -> dict | None:
    """The instructions of the span run in tiles (its kernels' and the copies of the rows kept between tiles),
    from the first to the last, as a band over the arena's picture."""
    if compiled.patches is None:
        return None
    nodes = set(compiled.patches.nodes)
    steps = [i for i, instr in enumerate(compiled.program.instrs)
             if instr.node.removesuffix(KEPT) in nodes]
    sx = SVG_WIDTH / max(len(report.steps), 1)
    lines = compiled.patches.lines()
    return dict(x=f"{MARGIN + steps[0] * sx:.1f}", w=f"{(steps[-1] - steps[0] + 1) * sx:.1f}",
                text=f"{compiled.patches.plan.tiles} tiles", title="; ".join(lines))


def arena_rects(report: MemoryReport) -> list[dict]:
    """One rectangle per arena buffer: x its lifetime in instructions, y its bytes in the arena."""
    sx = SVG_WIDTH / max(len(report.steps), 1)
    sy = SVG_HEIGHT / max(report.arena_bytes, 1)
    rects = []
    for s in report.buffers:
        if s.offset is None:
            continue
        x, w = MARGIN + s.first * sx, (s.last - s.first + 1) * sx
        y, h = MARGIN + SVG_HEIGHT - (s.offset + s.size) * sy, max(s.size * sy, 1)
        rects.append(dict(x=f"{x:.1f}", y=f"{y:.1f}", w=f"{w:.1f}", h=f"{h:.1f}", tx=f"{x + 3:.1f}",
                          ty=f"{y + h / 2 + 4:.1f}", hue=hash_hue(s.label), span=s,
                          labelled=w > 7 * len(s.label) + 6 and h > 14))
    return rects


def hash_hue(label: str) -> int:
    """A stable colour per name (Python's hash() is salted per run)."""
    return sum(label.encode()) * 47 % 360


def kib(nbytes: int) -> str:
    return f"{nbytes / 1024:.1f} KiB"
