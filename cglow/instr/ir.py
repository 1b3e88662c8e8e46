"""The address-only instruction list: buffers, strided views, and the closed set of primitives.

Every primitive reads and writes *views*: a buffer, an element offset, a shape and element strides.
Transposes, broadcasts, reshapes and slices are views, so they cost no instruction. The scalar work of
a Map, a Reduce and a kernel's Epilogue is an expression tree (instr/expr.py) whose Input(i) is the
primitive's input i and whose Acc is a kernel's accumulator. Each primitive declares its own facts: its
kernel's name, its operands' roles, its expressions, its multiply-accumulates and its work.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from functools import cached_property
import math
from typing import ClassVar

import numpy as np

from ..c_text import NARROW_FLOATS
from ..graph.geometry import Window
from .expr import ACC, Expr, Input, substitute

KINDS = ("input", "output", "const", "arena", "state")  # state: in the arena, kept between runs


@dataclass(frozen=True)
class Buffer:
    id: int
    kind: str               # one of KINDS
    size: int               # elements
    label: str              # the ONNX tensor it was made for (data, not code)
    index: int = 0          # position among the graph inputs or outputs
    data: np.ndarray | None = field(default=None, compare=False)  # a const buffer's values, a state's initial ones
    dtype: np.dtype = np.dtype(np.float32)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))


@dataclass(frozen=True)
class View:
    buf: int
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]

    @staticmethod
    def of(buf: int, shape: tuple[int, ...], offset: int = 0) -> "View":
        return View(buf, offset, tuple(shape), contiguous_strides(shape))

    @staticmethod
    def laid_out(buf: int, shape: tuple[int, ...], order: tuple[int, ...]) -> "View":
        """A fresh buffer's view whose dims lie in memory in `order` (outermost first): (0, 2, 3, 1) puts
        an NCHW value's channels innermost."""
        physical = View.of(buf, tuple(shape[d] for d in order))
        return physical.permute(tuple(order.index(d) for d in range(len(shape))))

    def order(self) -> tuple[int, ...] | None:
        """The dims from outermost to innermost in memory if the view is a whole block of its buffer's
        memory in some dim order (unit dims first), else None."""
        live = sorted((d for d, n in enumerate(self.shape) if n != 1), key=lambda d: -self.strides[d])
        step = 1
        for d in reversed(live):
            if self.strides[d] != step:
                return None
            step *= self.shape[d]
        return tuple(d for d, n in enumerate(self.shape) if n == 1) + tuple(live)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def same_layout(self, other: "View") -> bool:
        """One shape, and one stride for every dim that is not a unit dim (a unit dim's stride means nothing)."""
        return self.shape == other.shape and all(s == t for d, s, t in zip(self.shape, self.strides, other.strides)
                                                 if d != 1)

    def is_contiguous(self) -> bool:
        return all(s == c for d, s, c in zip(self.shape, self.strides, contiguous_strides(self.shape)) if d != 1)

    def covers(self, size: int) -> bool:
        """True if the view is the whole of a buffer of `size` elements, in row-major order."""
        return self.offset == 0 and self.size == size and self.is_contiguous()

    def whole(self, size: int) -> bool:
        """True if the view reaches every element of a buffer of `size` elements once, in any dim order."""
        return self.offset == 0 and self.size == size and self.order() is not None

    def permute(self, perm) -> "View":
        return replace(self, shape=tuple(self.shape[p] for p in perm), strides=tuple(self.strides[p] for p in perm))

    def broadcast_to(self, shape: tuple[int, ...]) -> "View":
        pad = len(shape) - len(self.shape)
        dims = (1,) * pad + self.shape
        strides = (0,) * pad + self.strides
        return replace(self, shape=tuple(shape),
                       strides=tuple(0 if d == 1 and n != 1 else s for d, n, s in zip(dims, shape, strides)))

    def slice(self, axis: int, start: int, length: int) -> "View":
        shape = self.shape[:axis] + (length,) + self.shape[axis + 1:]
        return replace(self, offset=self.offset + start * self.strides[axis], shape=shape)

    def reshape(self, shape: tuple[int, ...]) -> "View | None":
        """The same elements in row-major order under a new shape, or None if strides cannot express it."""
        shape = tuple(shape)
        if self.is_contiguous() or 0 in self.shape:  # an empty view has no element to place
            return View(self.buf, self.offset, shape, contiguous_strides(shape))
        # split the old dims into runs that are contiguous among themselves, then lay the new dims over them
        runs: list[list[int]] = []  # each run: [size, innermost stride]
        for d, s in zip(self.shape, self.strides):
            if d == 1:
                continue
            if runs and runs[-1][1] == s * d:
                runs[-1] = [runs[-1][0] * d, s]
            else:
                runs.append([d, s])
        strides, r, left = [], 0, runs[0][0] if runs else 1
        for d in shape:
            if d == 1:
                strides.append(0)
                continue
            if r >= len(runs) or left % d:
                return None
            left //= d
            strides.append(runs[r][1] * left)
            if left == 1:
                r += 1
                left = runs[r][0] if r < len(runs) else 1
        return View(self.buf, self.offset, shape, tuple(strides))


@dataclass(frozen=True)
class Value:
    """The graph value that an instruction's output holds whole once it has run: its name and its view, in the
    value's own shape (cglow check --all-tensors reads it there)."""
    name: str
    view: View


@dataclass(frozen=True)
class Epilogue:
    """What a reducing kernel does with its accumulator before the store: expr over Acc and inputs. With
    `init`, the accumulator starts at that input's value (a bias) instead of zero, so that expr need not add
    it: the kernels whose tiles run along an output's channels load it once per channel of a tile."""
    expr: Expr = ACC
    ins: tuple[View, ...] = ()   # each in the output's shape
    init: int | None = None      # the index in ins of the accumulator's first value

    def folded(self) -> Epilogue:
        """The same with the accumulator starting at zero: the initial value added in expr."""
        if self.init is None:
            return self
        return Epilogue(substitute(self.expr, acc=ACC + Input(self.init)), self.ins)


def accumulator(values: np.dtype, out: np.dtype) -> np.dtype:
    """The type a kernel accumulates in: 8- and 16-bit integers (quantized tensors) in int32, whatever they
    are stored as, unless the output is wider (a sum of int16 squares); a float stored narrower (float16...) in
    float32 (instr/stored_floats.py); everything else in the output's type."""
    values, out = np.dtype(values), np.dtype(out)
    if values.kind in "iu" and values.itemsize <= 2 and out.itemsize <= 4:
        return np.dtype(np.int32)
    return np.dtype(np.float32) if out in NARROW_FLOATS else out


def dot_operands(values: np.dtype, weights: np.dtype) -> bool:
    """Whether a convolution or matrix product of these element types can run as 4-lane dot products over its
    reduced dim (kernels/conv.py, kernels/gemm.py): 8-bit values by int8 weights."""
    return np.dtype(values) in (np.dtype(np.int8), np.dtype(np.uint8)) and np.dtype(weights) == np.int8


class Primitive:
    """What every primitive declares. `primitive`: its kernel's name ("map", "gemm"...). `roles`, Glow's operand
    roles: its view fields in the order its kernel takes them, with what it does to each: "in" read, "out" written
    whole, "scratch" its own temporary, written and read back within the kernel. An Epilogue, or a tuple of
    views, stands for all its views."""
    primitive: ClassVar[str]
    roles: ClassVar[tuple[tuple[str, str], ...]]
    out: View

    def expressions(self) -> tuple[Expr, ...]:
        """Its expression trees."""
        return ()

    def macs(self) -> int:
        """Its multiply-accumulates (only a Gemm's and a Conv's count)."""
        return 0

    def work(self) -> int:
        """Its kernel's work units: its multiply-accumulates if it has any, else one per element it visits (here
        its output's)."""
        return math.prod(self.out.shape)


@dataclass(frozen=True)
class Map(Primitive):
    """out[i] = expr(ins[0][i], ins[1][i], ...) over out's shape; inputs are broadcast views."""
    primitive = "map"
    roles = (("out", "out"), ("ins", "in"))
    out: View
    ins: tuple[View, ...]
    expr: Expr
    node: str
    value: Value | None = None

    def expressions(self) -> tuple[Expr, ...]:
        return (self.expr,)


@dataclass(frozen=True)
class Reduce(Primitive):
    """out[o] = post(combine over r of pre(ins[0][o, r], ...)): each input has out's shape followed by
    the reduced dims (broadcast views allowed). Kinds "sum", "prod", "max", "min" combine values;
    "argmax" and "argmin" (one reduced dim) store the index of the first extreme, or of the last one
    when `last` is set."""
    primitive = "reduce"
    roles = (("out", "out"), ("ins", "in"))
    out: View
    ins: tuple[View, ...]
    kind: str
    pre: Expr               # over Input(i)
    post: Expr              # over Acc
    node: str
    last: bool = False
    value: Value | None = None

    def expressions(self) -> tuple[Expr, ...]:
        return (self.pre, self.post)

    def work(self) -> int:
        """One unit per element of its input."""
        return math.prod(self.ins[0].shape)


@dataclass(frozen=True)
class Gather(Primitive):
    """out[o] = data[o + j * axis_stride] with j = index[o] (a negative j counts from axis_len; an index
    out of range reads element 0 of the axis). data and index are views in out's shape: data's strides
    place every output element, with the gathered axis folded out (stride 0)."""
    primitive = "gather"
    roles = (("out", "out"), ("data", "in"), ("index", "in"))
    out: View
    data: View
    index: View
    axis_len: int
    axis_stride: int
    node: str
    value: Value | None = None


@dataclass(frozen=True)
class Scatter(Primitive):
    """out = data, then each element u of updates combined into out at index[u] along out's dim `axis` (a negative
    index counts from its length; one out of range is skipped): `kind` "none" stores it, "add", "mul", "max" and
    "min" combine it with what is there, in the order of updates' elements. index has updates' shape; `dims` maps
    each dim of updates to the dim of out it runs along, or None for a dim whose place the index gives. So the
    places follow out's own strides, whatever view a pass turns out into (a concat's slice, a graph output)."""
    primitive = "scatter"
    roles = (("out", "out"), ("data", "in"), ("updates", "in"), ("index", "in"))
    out: View
    data: View              # out's shape
    updates: View
    index: View             # updates' shape
    axis: int
    dims: tuple[int | None, ...]
    kind: str
    node: str
    value: Value | None = None

    def places(self) -> tuple[View, int, int]:
        """The view of out over updates' shape at index 0 of the axis, the axis' length and its stride."""
        strides = tuple(0 if d is None else self.out.strides[d] for d in self.dims)
        return (View(self.out.buf, self.out.offset, self.updates.shape, strides), self.out.shape[self.axis],
                self.out.strides[self.axis])

    def work(self) -> int:
        """One unit per element of out (its copy of data) and of updates."""
        return math.prod(self.out.shape) + math.prod(self.updates.shape)


@dataclass(frozen=True)
class Conv(Primitive):
    """2-D convolution, x [N,C,H,W], w [M,C/group,KH,KW], out [N,M,OH,OW]. With a `ring` (scratch rows
    [top pad + 1, M, OW]), out is x itself: the convolution runs in place, row by row. With a `panel`
    (scratch, int32 words), a tile's input columns are widened there to 16-bit pairs first (runtime_c/widen4.c),
    and w is in channel pairs (instr/passes.py pair_weights)."""
    primitive = "conv"
    roles = (("out", "out"), ("x", "in"), ("w", "in"), ("epi", "in"), ("ring", "scratch"), ("panel", "scratch"))
    out: View
    x: View
    w: View
    win: Window
    group: int
    epi: Epilogue
    node: str
    ring: View | None = None
    x_zero: int = 0         # integer convolutions: subtracted from every input value read (padding reads none)
    panel: View | None = None
    x_pad: int | None = None  # a gathered window's padding where it is not x_zero (instr/vector_dots.py)
    value: Value | None = None

    def expressions(self) -> tuple[Expr, ...]:
        return (self.epi.expr,)

    def macs(self) -> int:
        """prod(out.shape) * (C/group) * KH * KW."""
        return math.prod(self.out.shape) * math.prod(self.w.shape[1:])

    def work(self) -> int:
        return self.macs()


OCTET = 8  # 4-bit values a kernel unpacks at a time (Chunks)


@dataclass(frozen=True)
class Chunks:
    """Where each chunk of `width` columns of a matrix product's weights lies in their buffer, laid out as its kernel
    reads them (instr/narrow_weights.py chunks_of): `runs` runs (one per k where the columns are innermost, else one),
    `run_step` elements apart, each starting `column` elements further per column of the chunk's first; the kernel
    reads `group` columns' elements at a time (a block of them, or a pair). `size`: the buffer's elements;
    `weights`: the matrix product's view of them, as the kernel reads them once unpacked (Gemm.b is of the narrow
    values); `unit`: the values the kernel unpacks at a time (OCTET nibbles, or one)."""
    width: int
    runs: int
    run_step: int
    column: int
    group: int
    size: int
    weights: View
    unit: int

    def length(self, first: int, width: int) -> int:
        """The elements of each run of the chunk of `width` columns from column `first`, in whole units (past a
        run's end, the next one's first values or the buffer's padding)."""
        span = -(-width // self.group) * self.group * self.column
        if self.runs == 1:
            span = min(span, self.size - first * self.column)
        return -(-span // self.unit) * self.unit


@dataclass(frozen=True)
class Gemm(Primitive):
    """Batched matrix product: a [*B,M,K], b [*B,K,N], out [*B,M,N]; epilogue inputs broadcast to out.
    Integer products subtract zero points from a's and b's values. With a `panel` (scratch, int32 words), a
    tile's rows of a are widened there to 16-bit pairs first (runtime_c/widen4.c), and b is in channel pairs
    (instr/passes.py pair_weights). With `blocks`, b's buffer holds it in blocks of that many columns, each
    block's k in groups of four (instr/vector_dots.py block_weights), its view's strides those of [K, N]. With
    `unpacked` (scratch), b is a buffer that holds its values in a narrower type (`chunks`: where, and b's view of
    them), which the kernel unpacks there a chunk of columns at a time (instr/narrow_weights.py). With `nibbles`, b's
    buffer holds its values 8 more as nibbles eight a word (nibbles.pack_octets), each column's k in whole words,
    `nibbles` bytes a column; the dot products unpack them in registers (narrow_weights.nibble_dots)."""
    primitive = "gemm"
    roles = (("out", "out"), ("a", "in"), ("b", "in"), ("epi", "in"), ("panel", "scratch"),
             ("unpacked", "scratch"))
    out: View
    a: View
    b: View
    epi: Epilogue
    node: str
    zeros: tuple[int, int] = (0, 0)
    panel: View | None = None
    blocks: int = 0
    unpacked: View | None = None
    chunks: Chunks | None = None
    nibbles: int = 0
    value: Value | None = None

    def expressions(self) -> tuple[Expr, ...]:
        return (self.epi.expr,)

    def macs(self) -> int:
        """prod(out.shape) * K."""
        return math.prod(self.out.shape) * self.a.shape[-1]

    def work(self) -> int:
        return self.macs()


def gemm_dot_products(g: Gemm, a: np.dtype, b: np.dtype) -> bool:
    """Whether a Gemm of these element types runs as 4-lane dot products on a target with them (kernels/
    gemm.py): 8-bit values by int8 weights, no zero point on b, and k contiguous in both operands."""
    return dot_operands(a, b) and not g.zeros[1] and g.a.strides[-1] == 1 and g.b.strides[-2] == 1


@dataclass(frozen=True)
class Pool(Primitive):
    """Pooling over 1 to 3 spatial dims, x [N,C,*spatial], out [N,C,*out]: kind "max", "avg", or "argmax"
    (the flat index in x of each window's first maximum, column-major over the spatial dims if asked)."""
    primitive = "pool"
    roles = (("out", "out"), ("x", "in"))
    out: View
    x: View
    kind: str
    win: Window
    count_include_pad: bool
    node: str
    column_major: bool = False
    value: Value | None = None

    def work(self) -> int:
        """One unit per element of each output's window."""
        return math.prod(self.out.shape) * math.prod(self.win.kernel)


@dataclass(frozen=True)
class Compact(Primitive):
    """A greedy selection along the last dim, in order: out[o, k] is the position i of the k-th candidate of row o
    that is kept, -1 after the last one kept; out's last dim is the most kept (its capacity). Candidate i is kept when
    keep[o, i] is nonzero, fewer than the capacity were kept before it and, with a `conflict` view, no kept j
    conflicts with it (conflict[o, j, i] nonzero). Without conflicts it is a stream compaction (the kept positions
    of a mask: NonZero, Compress); with them the suppression loop of NonMaxSuppression (conflict: the overlap of two
    boxes beyond the threshold). A sequential scan, which no other primitive can express in linear time; what is
    kept is then read through a Gather of these positions. keep is [*outer, n], conflict [*outer, n, n]."""
    primitive = "compact"
    roles = (("out", "out"), ("keep", "in"), ("conflict", "in"))
    out: View
    keep: View
    node: str
    conflict: View | None = None
    value: Value | None = None

    def work(self) -> int:
        """One unit per candidate, times the capacity with conflicts (each kept one is checked)."""
        return math.prod(self.keep.shape) * (self.out.shape[-1] if self.conflict else 1)


@dataclass(frozen=True)
class Repeat(Primitive):
    """A loop body run `trips` times (a Loop or a Scan beyond the unrolling bound: lower/repeat.py). Each iteration
    writes its number (int64) to `out`, copies each `slides_in` (outer, slot) from the outer view to the slot, runs
    `body` (instructions already through their passes), copies each `slides_out` (slot, outer) from the slot to the
    outer view, and each `carried` (slot, state) from the body's new state to its state slot. A slide's outer view is
    the one of iteration 0; iteration `it` moves it by `it * step` elements (its `steps` entry, in slides_in then
    slides_out order). To the passes around it, it is one instruction that writes its counter and touches every
    buffer that these name (`touched`, role "scratch": written and read), whole."""
    primitive = "repeat"
    roles = (("out", "out"), ("touched", "scratch"))
    out: View
    body: tuple
    trips: int
    slides_in: tuple[tuple[View, View], ...]
    slides_out: tuple[tuple[View, View], ...]
    steps: tuple[int, ...]
    carried: tuple[tuple[View, View], ...]
    node: str
    value: Value | None = None

    def copies(self) -> tuple[tuple[Map, View | None, int], ...]:
        """Each iteration's kernels in order, with the outer view that moves (None: none) and its step."""
        ins = [(Map(slot, (outer,), Input(0), f"{self.node} scan input"), outer, step)
               for (outer, slot), step in zip(self.slides_in, self.steps)]
        outs = [(Map(outer, (slot,), Input(0), f"{self.node} scan output"), outer, step)
                for (slot, outer), step in zip(self.slides_out, self.steps[len(self.slides_in):])]
        kept = [(Map(state, (slot,), Input(0), f"{self.node} loop-carried"), None, 0) for slot, state in self.carried]
        return tuple(ins + [(i, None, 0) for i in self.body] + outs + kept)

    @cached_property  # the passes ask often; a frozen instance's never changes
    def touched(self) -> tuple[View, ...]:
        """A view of every buffer its kernels touch, over every element that a view of it reaches in any
        iteration (a sliding one, from its first place to its last): where another instruction may go around
        it follows from these. (The first view of each, the first iteration's slide of a scan output, let a
        Slice of that output's later elements run before the loop had written them.)"""
        spans: dict[int, tuple[int, int]] = {}
        for instr, moving, step in self.copies():
            for v in (instr.out,) + reads(instr):
                lo, hi = extent(v, instr)
                if v == moving:
                    lo, hi = min(lo, lo + (self.trips - 1) * step), max(hi, hi + (self.trips - 1) * step)
                first, last = spans.get(v.buf, (lo, hi))
                spans[v.buf] = min(first, lo), max(last, hi)
        return tuple(View(buf, lo, (hi - lo + 1,), (1,)) for buf, (lo, hi) in spans.items())

    def expressions(self) -> tuple[Expr, ...]:
        return tuple(e for instr, _, _ in self.copies() for e in instr.expressions())

    def macs(self) -> int:
        return self.trips * sum(i.macs() for i in self.body)

    def work(self) -> int:
        return self.trips * sum(i.work() for i, _, _ in self.copies())


Instr = Map | Reduce | Conv | Gemm | Pool | Gather | Scatter | Compact | Repeat


def kernels(instrs) -> list:
    """The instructions that become kernels: a Repeat's own, in the order each iteration runs them."""
    found = []
    for instr in instrs:
        found += kernels(i for i, _, _ in instr.copies()) if isinstance(instr, Repeat) else [instr]
    return found


def map_views(instr: Instr, move) -> Instr:
    """instr with every view v it holds (a Repeat's too, its body's included) replaced by move(v)."""
    if isinstance(instr, Repeat):
        pairs = {f: tuple((move(a), move(b)) for a, b in getattr(instr, f))
                 for f in ("slides_in", "slides_out", "carried")}
        return replace(instr, out=move(instr.out), body=tuple(map_views(i, move) for i in instr.body), **pairs)
    changes = {}
    for f in fields(instr):
        value = getattr(instr, f.name)
        if isinstance(value, View):
            changes[f.name] = move(value)
        elif isinstance(value, tuple) and value and isinstance(value[0], View):
            changes[f.name] = tuple(move(v) for v in value)
        elif isinstance(value, Epilogue):
            changes[f.name] = replace(value, ins=tuple(move(v) for v in value.ins))
        elif isinstance(value, Value):
            changes[f.name] = Value(value.name, move(value.view))
    return replace(instr, **changes)


def channels_innermost(c: Conv) -> bool:
    """Whether a convolution writes its output channels contiguously (NHWC): then its kernel vectorizes
    over output channels and reads weights packed [KH, KW, C/group, M]."""
    return c.out.shape[1] > 1 and c.out.strides[1] == 1


def operands(instr: Instr) -> tuple[tuple[str, View], ...]:
    """Every view the instruction touches, with its role (its roles), in the kernel's order."""
    found: list[tuple[str, View]] = []
    for name, role in instr.roles:
        value = getattr(instr, name)
        views = value.ins if isinstance(value, Epilogue) else value if isinstance(value, tuple) else \
            () if value is None else (value,)
        found += [(role, v) for v in views]
    return tuple(found)


def reads(instr: Instr) -> tuple[View, ...]:
    """The views an instruction reads: its inputs, and its scratch (read back after it writes it)."""
    return tuple(v for role, v in operands(instr) if role != "out")


def extent(v: View, instr: Instr | None = None) -> tuple[int, int]:
    """The lowest and highest element of its buffer that the view v reaches; when instr reads it as a
    Gather's data, the gathered axis (folded out of its shape) too."""
    dims = list(zip(v.shape, v.strides))
    if isinstance(instr, Gather) and v is instr.data:
        dims.append((instr.axis_len, instr.axis_stride))
    return (v.offset + sum(min(0, s) * (d - 1) for d, s in dims),
            v.offset + sum(max(0, s) * (d - 1) for d, s in dims))


@dataclass(frozen=True)
class Program:
    name: str
    buffers: tuple[Buffer, ...]
    instrs: tuple[Instr, ...]
    inputs: tuple[int, ...]     # buffer ids, graph order
    outputs: tuple[int, ...]

    def buffer(self, id_: int) -> Buffer:
        return self.buffers[id_]

    def weights(self) -> list[Buffer]:
        """The constant buffers its instructions read, in order of first use (what the C file stores)."""
        found: dict[int, Buffer] = {}
        for instr in kernels(self.instrs):
            for v in (instr.out,) + reads(instr):
                if self.buffers[v.buf].kind == "const":
                    found.setdefault(v.buf, self.buffers[v.buf])
        return list(found.values())
