"""Assemble net.c and net.h: weights, one static function per instruction, and the run function."""
from __future__ import annotations

from dataclasses import dataclass
import re

import jinja2
import numpy as np

from .. import __version__
from ..alloc.arena import Plan
from ..instr.ir import Program, View, reads
from ..kernels.render import PRIMITIVE_NAMES, comment, render
from ..lower.literals import c_float

ENV = jinja2.Environment(loader=jinja2.PackageLoader("cglow", "emit_c"), trim_blocks=True, lstrip_blocks=True,
                         undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True)
C_KEYWORDS = {"auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum",
              "extern", "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return",
              "short", "signed", "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void",
              "volatile", "while"}


def c_identifier(text: str) -> str:
    ident = re.sub(r"[^A-Za-z0-9_]", "_", text) or "net"
    ident = "m_" + ident if ident[0].isdigit() else ident
    return ident + "_" if ident in C_KEYWORDS else ident


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


@dataclass(frozen=True)
class Emitted:
    c_source: str
    h_source: str
    arena_bytes: int
    weights_bytes: int
    kernels: int


def float_lines(data: np.ndarray, per_line: int = 8) -> list[str]:
    """Initializer lines for a C float array."""
    values = [c_float(v) for v in np.asarray(data, np.float32).reshape(-1)]
    return [", ".join(values[i:i + per_line]) + "," for i in range(0, len(values), per_line)]


def emit(prog: Program, plan: Plan, prefix: str, source: str, opset: int,
         inputs: list[TensorInfo], outputs: list[TensorInfo]) -> Emitted:
    weight_names: dict[int, str] = {}
    weights = []
    for instr in prog.instrs:
        for v in (instr.out,) + reads(instr):
            buf = prog.buffer(v.buf)
            if buf.kind == "const" and buf.id not in weight_names:
                weight_names[buf.id] = f"{prefix}_w{len(weights)}"
                weights.append(dict(name=weight_names[buf.id], size=buf.size, comment=comment(buf.label),
                                    lines=float_lines(buf.data)))

    def base(view: View) -> str:
        buf = prog.buffer(view.buf)
        if buf.kind == "arena":
            name, offset = f"{prefix}_arena", plan.offsets[buf.id] + view.offset
        else:
            name = {"input": f"input_{buf.index}", "output": f"output_{buf.index}"}.get(buf.kind) or \
                weight_names[buf.id]
            offset = view.offset
        return f"{name} + {offset}" if offset else name

    kernels, calls, used = [], [], set()
    for n, instr in enumerate(prog.instrs):
        fn = f"{prefix}_{n}_{PRIMITIVE_NAMES[type(instr)]}"
        kernel = render(fn, instr)
        kernels.append(kernel.text.strip())
        calls.append(f"{fn}({', '.join(base(v) for v in kernel.params)});")
        used.update(v.buf for v in kernel.params)
    calls = [f"(void)input_{i};" for i, b in enumerate(prog.inputs) if b not in used] + calls

    params = ", ".join([f"const float *input_{i}" for i in range(len(inputs))] +
                       [f"float *output_{i}" for i in range(len(outputs))])
    weights_bytes = 4 * sum(w["size"] for w in weights)
    ctx = dict(prefix=prefix, P=prefix.upper(), guard=f"{prefix.upper()}_H", version=__version__,
               source=comment(source, 120), opset=opset, params=params, arena_elems=plan.size,
               arena_bytes=4 * plan.size, weights_bytes=weights_bytes, weights=weights, kernels=kernels,
               calls=calls, instr_count=len(prog.instrs),
               inputs=[dict(size=t.size, shape=t.shape, name=comment(t.name)) for t in inputs],
               outputs=[dict(size=t.size, shape=t.shape, name=comment(t.name)) for t in outputs])
    return Emitted(ENV.get_template("net.c.j2").render(ctx), ENV.get_template("net.h.j2").render(ctx),
                   4 * plan.size, weights_bytes, len(prog.instrs))
