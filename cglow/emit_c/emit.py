"""Assemble net.c and net.h (and with external weights the weights file): weights, one static function per
instruction, and the run function."""
from __future__ import annotations

from dataclasses import dataclass
import hashlib
import re
from typing import Iterable

import jinja2
import numpy as np

from ..alloc.arena import Plan
from ..c_text import c_array_lines, c_float, c_literal, c_type
from ..instr.expr import helpers
from ..instr.ir import Buffer, Program, Repeat, View
from ..kernels.kernel import comment
from ..options import Options
from ..runtime_files import RUNTIME_C
from ..tiles import tiles_for
from ..version import __version__
from .calls import Calls

ENV = jinja2.Environment(loader=jinja2.PackageLoader("cglow", "emit_c"), trim_blocks=True, lstrip_blocks=True,
                         undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True)
C_KEYWORDS = {"auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum",
              "extern", "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return",
              "short", "signed", "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void",
              "volatile", "while"}


def c_identifier(text: str) -> str:
    """Text made a C identifier: ASCII letters, digits and _, not starting with a digit or with _ (names
    that start with _ belong to the C implementation), not a keyword."""
    ident = re.sub(r"[^A-Za-z0-9_]", "_", text) or "net"
    ident = "m" + ident if ident[0] == "_" else "m_" + ident if ident[0].isdigit() else ident
    return ident + "_" if ident in C_KEYWORDS else ident


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype = np.dtype(np.float32)
    scale: float | None = None      # an 8-bit tensor of a quantized model: real = (q - zero_point) * scale
    zero_point: int | None = None
    counted: int | None = None      # an output of run-time length along this dim (graph TensorType.counted)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def ctype(self) -> str:
        return c_type(self.dtype)


@dataclass(frozen=True)
class Emitted:
    c_source: str
    h_source: str
    arena_bytes: int
    weights_bytes: int
    kernels: int
    weights_blob: bytes = b""  # with Options.external_weights: the weights file's bytes
    functions: tuple[str, ...] = ()  # the C function that net_run calls for each instruction


TAG_BYTES = 8  # the weights file ends with this many bytes that identify it
# On a target with vector units the arena and the weights start on a cache line. gcc gave them that alignment
# itself while it specialized kernels for their constant addresses (runtime_c/kernel.c); without it, x86-64
# AVX-512 resnet8 and unet ran 4-5% slower at -O3 -march=native (64-byte loads straddling two lines).
CACHE_LINE = 64


@dataclass(frozen=True)
class Blob:
    """The weights as one little-endian file: each tensor at a multiple of `align`, then a tag."""
    data: bytes
    offsets: dict[int, int]      # buffer id -> byte offset
    align: int

    @property
    def tag(self) -> bytes:
        return self.data[-TAG_BYTES:]


def weights_blob(weights: list[Buffer], align: int) -> Blob:
    """Lay the weights out at aligned offsets; the tag is a digest of the bytes and of the layout."""
    align = max([align] + [b.dtype.itemsize for b in weights])
    chunks, offsets, end = [], {}, 0
    for buf in weights:
        start = -(-end // align) * align
        chunks += [bytes(start - end), np.ascontiguousarray(buf.data, buf.dtype.newbyteorder("<")).tobytes()]
        offsets[buf.id], end = start, start + buf.nbytes
    data = b"".join(chunks)
    layout = repr([(offsets[b.id], b.dtype.str, b.size) for b in weights]).encode()
    return Blob(data + hashlib.sha256(data + layout).digest()[:TAG_BYTES], offsets, align)


MACROS = r"\bCGLOW_(TILE_LOOP|TILE_UNROLL|KERNEL|DSP|DSP_ASM|FP_ASM|ROW_LOOP|CLIP|HALF|VNNI)\b"
# what the kernel templates call (kernels/*.j2, *.py; the loads of stored floats, instr/stored_floats.py), and the
# expressions' printer (instr/expr.py INEXACT)
KERNEL_FUNCTIONS = "fma|mul_add|dot2|dot4|mac2|widen4|vnni_sum16|nibbles8|half_finite_to_float|half_to_float|" \
    "bfloat_to_float|opaque"


def _used(text: str, functions: str = r"\w+") -> set[str]:
    """The helpers that C text uses: cglow_NAME in runtime_c/NAME.c for a call of cglow_NAME( (NAME one of
    `functions`), and the macro CGLOW_NAME in runtime_c/name.c for a use of CGLOW_NAME."""
    return set(re.findall(rf"\bcglow_({functions})\(", text)) | {m.lower() for m in re.findall(MACROS, text)}


def runtime_helpers(called: Iterable[str], kernels: Iterable[str] = ()) -> list[str]:
    """The runtime_c helpers that a file needs: `called`, those its expressions call (their C names, cglow_NAME;
    instr/expr.py helpers), and those the kernel templates write into the kernels' text; a helper's own
    calls too, each helper after those it calls, otherwise in name order."""
    folder = RUNTIME_C
    texts: dict[str, str] = {}

    def add(name: str) -> None:
        if name not in texts:
            text = (folder / f"{name}.c").read_text().strip()
            for callee in sorted(_used(text) - {name}):
                add(callee)
            texts[name] = text
    for name in sorted({name.removeprefix("cglow_") for name in called} | _used("\n".join(kernels), KERNEL_FUNCTIONS)):
        add(name)
    return list(texts.values())


def emit(prog: Program, plan: Plan, prefix: str, source: str, opset: int,
         inputs: list[TensorInfo], outputs: list[TensorInfo], options: Options = Options(),
         header: str = "", trace: bool = False) -> Emitted:
    """net.c, which includes `header` (default: the prefix plus .h), and the header's text. With `trace`,
    net_run passes every graph value that a kernel writes whole, once written, to <prefix>_trace (declared,
    not defined: cglow check --all-tensors links it from its harness)."""
    consts = {b.id: b for b in prog.weights()}
    weight_names = {buf_id: f"{prefix}_w{n}" for n, buf_id in enumerate(consts)}
    blob = weights_blob(list(consts.values()), options.align) if options.external_weights else None
    weights = [] if blob else [
        dict(name=weight_names[b.id], size=max(b.size, 1), ctype=c_type(b.dtype), comment=comment(b.label),
             body="    " + "\n    ".join(c_array_lines(b.data)))
        for b in consts.values()]
    io_names = _io_names(prog, outputs)
    in_arena = {b.id for b in prog.buffers
                if b.kind in ("arena", "state") or options.io_in_arena and b.kind in ("input", "output")}

    def base(view: View) -> str:
        buf = prog.buffer(view.buf)
        if buf.id in in_arena:
            offset = plan.offsets[buf.id] + view.offset * buf.dtype.itemsize
            return f"{prefix.upper()}_AT({c_type(buf.dtype)}, {offset})"
        if blob and buf.kind == "const":
            offset = blob.offsets[buf.id] + view.offset * buf.dtype.itemsize
            return f"{prefix.upper()}_WEIGHT({c_type(buf.dtype)}, {offset})"
        name = io_names.get(buf.id) or weight_names[buf.id]
        return f"{name} + {view.offset}" if view.offset else name

    writer = Calls({b.id: b.dtype for b in prog.buffers}, base, tiles_for(options.target))
    kernels, used, calls, functions = writer.kernels, writer.used, [], []
    for n, instr in enumerate(prog.instrs):
        fn = f"{prefix}_{n}_{instr.primitive}"
        calls.append(writer.loop(fn, instr, 0) if isinstance(instr, Repeat) else writer.call(fn, instr))
        functions.append(fn if isinstance(instr, Repeat) else calls[-1].split("(", 1)[0])
        if trace and instr.value:
            buf = prog.buffer(instr.value.view.buf)
            calls.append(f"{prefix}_trace({n}, {base(View.of(buf.id, (buf.size,)))}, {buf.nbytes});")
    params = [f"const {t.ctype} *input_{i}" for i, t in enumerate(inputs)] + \
        [f"{c_type(prog.buffer(b).dtype)} *{io_names[b]}" for b in prog.outputs]
    unused = [f"(void){io_names[b]};" for b in prog.inputs + prog.outputs if b not in used]
    if options.io_in_arena:
        params, unused = [], []
    if options.external_weights:
        params.insert(0, "const void *weights")
    if options.caller_arena:
        params.insert(0, "void *arena")
    io = [dict(name=io_names[b.id], output=kind == "output", ctype=c_type(b.dtype), offset=plan.offsets.get(b.id, 0))
          for kind, ids in (("input", prog.inputs), ("output", prog.outputs)) for b in map(prog.buffer, ids)]
    weights_bytes = len(blob.data) if blob else sum(b.nbytes for b in consts.values())
    ctx = dict(prefix=prefix, P=prefix.upper(), guard=f"{prefix.upper()}_H", header=header or f"{prefix}.h",
               version=__version__, source=comment(source, 120), opset=opset, params=", ".join(params) or "void",
               arena_slots=-(-plan.size // 8), arena_bytes=plan.size, align=plan.align, options=options, io=io,
               state_bytes=plan.state_bytes, fills=_fills(prog, plan),
               line_align=0 if tiles_for(options.target).scalar else CACHE_LINE,
               weights_bytes=weights_bytes, weights=weights, kernels=kernels, blob=blob, tag_bytes=TAG_BYTES,
               calls=unused + calls, instr_count=len(prog.instrs), trace=trace,
               helpers=runtime_helpers({h for i in prog.instrs for e in i.expressions() for h in helpers(e)}, kernels),
               inputs=[_tensor(t) for t in inputs], outputs=[_tensor(t) for t in outputs])
    return Emitted(ENV.get_template("net.c.j2").render(ctx), ENV.get_template("net.h.j2").render(ctx),
                   plan.size, weights_bytes, len(prog.instrs), blob.data if blob else b"", tuple(functions))


def _io_names(prog: Program, outputs: list[TensorInfo]) -> dict[int, str]:
    """The C names of the input and output buffers, by id: input_i, output_i, and output_i_count for the count of
    output i, of run-time length (the program's outputs after the graph's, lower/program.py)."""
    counted = [i for i, t in enumerate(outputs) if t.counted is not None]
    names = {b: f"input_{i}" for i, b in enumerate(prog.inputs)}
    names.update((b, f"output_{i}" if i < len(outputs) else f"output_{counted[i - len(outputs)]}_count")
                 for i, b in enumerate(prog.outputs))
    return names


def _fills(prog: Program, plan: Plan) -> list[dict]:
    """The states that do not start at zero (an int8 one at its zero point): net_reset sets each element."""
    return [dict(offset=plan.offsets[b.id], ctype=c_type(b.dtype), count=b.size, label=comment(b.label),
                 value=c_literal(b.data[0], b.dtype)) for b in prog.buffers if b.kind == "state" and np.any(b.data)]


def _tensor(t: TensorInfo) -> dict:
    return dict(size=t.size, shape=t.shape, dtype=t.dtype.name, name=comment(t.name),
                scale=None if t.scale is None else c_float(t.scale), zero_point=t.zero_point, counted=t.counted,
                capacity=None if t.counted is None else t.shape[t.counted])
