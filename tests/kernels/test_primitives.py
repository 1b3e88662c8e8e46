"""Each primitive's generated C kernel, built on the host, against a NumPy reference.

Programs are built by hand (buffers, views, one primitive) and go through the real back end
(compile_program: instruction passes, arena allocation, C emission) and the host build. Shapes and
attributes are drawn from a seeded RNG, one draw per test id, so a failure is reproducible from its id.

Operands are drawn in several layouts, each a View and the same NumPy operation side by side
(`Operand`): contiguous inputs, constants, permuted views (transposes), stride-0 broadcasts from a
lower-rank source, and slices of a larger buffer (non-zero offsets).

Tolerances, against a float64 reference of the float32 inputs: elementwise maps rtol 1e-5 and
atol 1e-6; kernels that accumulate L terms (sums, products, windows) rtol 1e-5 and
atol 1e-6 * L * max(1, max|term|), where max|term| is bounded by the product of the factors' largest
magnitudes (a float32 sum's rounding error is at most about L * 6e-8 * max|term|); max reductions and
max pooling are held to the same bounds though they round only in their pre and post expressions.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from onnx import TensorProto, helper
import pytest

import cglow
from cglow.graph.geometry import Window, window
from cglow.graph.ir import Node
from cglow.instr.expr import ACC, Input, call, lit
from cglow.instr.ir import Conv, Epilogue, Gemm, Instr, Map, Pool, Reduce, View
from cglow.options import Options
from tests.programs import MAP_ATOL, RTOL, Builder, Operand, acc_atol, canvas, conv_ref, rand, taps
from tests.util import checked_model


def random_shape(rng: np.random.Generator, rank: int, high: int = 5) -> tuple[int, ...]:
    """Dims in 1..high, with 1 drawn often (unit dims are where strides get dropped)."""
    return tuple(1 if rng.random() < 0.25 else int(rng.integers(1, high + 1)) for _ in range(rank))


def broadcast_source(rng: np.random.Generator, shape) -> tuple[int, ...]:
    """A shape that broadcasts to `shape`: some leading dims dropped, some others set to 1."""
    drop = int(rng.integers(0, len(shape) + 1))
    return tuple(1 if rng.random() < 0.5 else d for d in shape[drop:])


LAYOUTS = ("plain", "const", "permuted", "broadcast", "sliced")


def random_operand(b: Builder, rng: np.random.Generator, shape, layouts=LAYOUTS) -> Operand:
    """An operand of `shape` in one of `layouts`."""
    shape = tuple(shape)
    layout = layouts[int(rng.integers(len(layouts)))]
    if layout == "const":
        return b.const(rand(rng, shape))
    if layout == "permuted":
        perm = rng.permutation(len(shape))
        return b.input(rand(rng, [shape[p] for p in perm])).permute(np.argsort(perm))
    if layout == "broadcast":
        return b.input(rand(rng, broadcast_source(rng, shape))).broadcast_to(shape)
    if layout == "sliced" and shape:
        axis, extra = int(rng.integers(len(shape))), int(rng.integers(1, 3))
        big = shape[:axis] + (shape[axis] + extra,) + shape[axis + 1:]
        return b.input(rand(rng, big)).slice(axis, int(rng.integers(0, extra + 1)), shape[axis])
    return b.input(rand(rng, shape))


@dataclass
class Case:
    """One primitive, ready to write any output view of `shape`, and what it must compute."""
    shape: tuple[int, ...]
    emit: Callable[[View], Instr]
    want: np.ndarray         # float64 reference
    atol: float
    about: str


# --- Map -------------------------------------------------------------------------------------

X, Y, Z = Input(0), Input(1), Input(2)
MAP_EXPRS = [
    (X + Y, lambda a, b: a + b),
    (call("fmaxf", X, 0.0), lambda a: np.maximum(a, 0.0)),
    (call("expf", X), lambda a: np.exp(a)),
    (X * Y + Z, lambda a, b, c: a * b + c),
    ((X - Y) / (1.0 + call("fabsf", X)), lambda a, b: (a - b) / (1.0 + np.abs(a))),
    (call("tanhf", X) * Y, lambda a, b: np.tanh(a) * b),
]


def map_case(b: Builder, rng: np.random.Generator) -> Case:
    shape = random_shape(rng, int(rng.integers(0, 6)))
    expr, fn = MAP_EXPRS[int(rng.integers(len(MAP_EXPRS)))]
    ins = [random_operand(b, rng, shape) for _ in range(fn.__code__.co_argcount)]
    return Case(shape, lambda out: Map(out, tuple(o.view for o in ins), expr, "map"),
                fn(*(o.value for o in ins)), MAP_ATOL, f"{expr} over {shape}: {[o.note for o in ins]}")


# --- Reduce ----------------------------------------------------------------------------------

# (kind, pre, post, pre in NumPy, post in NumPy); a two-input pre gets a broadcast second input
REDUCE_EXPRS = [
    ("sum", X, ACC, lambda x: x, lambda acc: acc),
    ("max", X, ACC, lambda x: x, lambda acc: acc),
    ("sum", (X - Y) * (X - Y), ACC / 7.0, lambda x, m: (x - m) ** 2, lambda acc: acc / 7.0),
    ("sum", X * X, 1.0 / call("sqrtf", ACC + 1e-5), lambda x: x * x, lambda acc: 1.0 / np.sqrt(acc + 1e-5)),
    ("sum", call("expf", X - Y), call("logf", ACC), lambda x, m: np.exp(x - m), lambda acc: np.log(acc)),
    ("max", X * Y, ACC + 1.0, lambda x, s: x * s, lambda acc: acc + 1.0),
]


def reduce_case(b: Builder, rng: np.random.Generator) -> Case:
    out_shape = random_shape(rng, int(rng.integers(0, 4)))
    reduced = random_shape(rng, int(rng.integers(1, min(3, 5 - len(out_shape)) + 1)))
    full = out_shape + reduced
    kind, pre, post, pre_fn, post_fn = REDUCE_EXPRS[int(rng.integers(len(REDUCE_EXPRS)))]
    # the first input in full shape, often permuted (to reduce middle axes); the second a broadcast
    ins = [random_operand(b, rng, full, ("plain", "const", "permuted", "permuted", "sliced"))]
    ins += [random_operand(b, rng, full, ("broadcast",)) for _ in range(pre_fn.__code__.co_argcount - 1)]
    terms = pre_fn(*(o.value for o in ins))
    axes = tuple(range(len(out_shape), len(full)))
    acc = terms.sum(axis=axes) if kind == "sum" else terms.max(axis=axes)
    return Case(out_shape, lambda out: Reduce(out, tuple(o.view for o in ins), kind, pre, post, "reduce"),
                post_fn(acc), acc_atol(int(np.prod(reduced)), terms),
                f"{kind} {pre} -> {post} over {out_shape} + {reduced}: {[o.note for o in ins]}")


# --- Gemm ------------------------------------------------------------------------------------

def matrix_operand(b: Builder, rng: np.random.Generator, batch, rows: int, cols: int, transposed: bool,
                   broadcast: bool, const: bool) -> Operand:
    """A [*batch, rows, cols] operand, stored [*, cols, rows] if transposed, with a broadcast batch."""
    stored_batch = broadcast_source(rng, batch) if broadcast else tuple(batch)
    stored = stored_batch + ((cols, rows) if transposed else (rows, cols))
    op = (b.const if const else b.input)(rand(rng, stored))
    if transposed:
        nb = len(stored_batch)
        op = op.permute(tuple(range(nb)) + (nb + 1, nb))
    return op.broadcast_to(tuple(batch) + (rows, cols))


def gemm_epilogue(b: Builder, rng: np.random.Generator, shape) -> tuple[Epilogue, Callable, str]:
    """An epilogue over an output of `shape` and what it does to the accumulator."""
    choice = int(rng.integers(5))
    if choice == 1:  # a bias along rows
        bias = b.const(rand(rng, shape[-1:])).broadcast_to(shape)
        return Epilogue(ACC + X, (bias.view,)), lambda acc: acc + bias.value, bias.note
    if choice == 2:
        c = random_operand(b, rng, shape)
        return Epilogue(0.5 * ACC + X, (c.view,)), lambda acc: 0.5 * acc + c.value, c.note
    if choice == 3:
        return Epilogue(call("fmaxf", ACC, 0.0)), lambda acc: np.maximum(acc, 0.0), "relu"
    if choice == 4:  # a per-row scale and a scalar shift
        s = b.input(rand(rng, shape[-2:-1] + (1,))).broadcast_to(shape)
        t = b.const(rand(rng, ())).broadcast_to(shape)
        return (Epilogue(ACC * X - Y, (s.view, t.view)), lambda acc: acc * s.value - t.value,
                f"{s.note} {t.note}")
    return Epilogue(), lambda acc: acc, "none"


def gemm_case(b: Builder, rng: np.random.Generator) -> Case:
    batch = tuple(int(d) for d in rng.integers(1, 4, int(rng.integers(0, 3))))
    m, k, n = (int(d) for d in rng.integers(1, 9, 3))
    ta, tb = (bool(t) for t in rng.random(2) < 0.5)
    bcast = ["none", "a", "b"][int(rng.integers(3))] if batch else "none"
    a = matrix_operand(b, rng, batch, m, k, ta, bcast == "a", const=False)
    w = matrix_operand(b, rng, batch, k, n, tb, bcast == "b", const=bool(rng.random() < 0.5))
    shape = batch + (m, n)
    epi, apply, note = gemm_epilogue(b, rng, shape)
    return Case(shape, lambda out: Gemm(out, a.view, w.view, epi, "gemm"), apply(a.value @ w.value),
                acc_atol(k, a.value, w.value),
                f"{a.note} @ {w.note}, epilogue {epi.expr} {note}")


# --- windows: Conv and Pool ------------------------------------------------------------------

def random_window(rng: np.random.Generator, op: str, kernel_max: int, dilated: bool, ceil_mode: bool = False):
    """Window attributes, pads smaller than the kernel, and input spatial dims the window fits."""
    kernel = tuple(int(k) for k in rng.integers(1, kernel_max + 1, 2))
    strides = [int(s) for s in rng.integers(1, 4, 2)]
    dilations = [int(d) for d in rng.integers(1, 3, 2)] if dilated else [1, 1]
    pads = [int(rng.integers(0, kernel[i % 2])) for i in range(4)]
    span = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    low = [max(1, s - pads[i] - pads[i + 2]) for i, s in enumerate(span)]
    spatial = tuple(int(rng.integers(lo, lo + 8)) for lo in low)
    node = Node(op, "n", (), (), dict(strides=strides, dilations=dilations, pads=pads))
    return spatial, window(node, spatial, kernel, ceil_mode)


def pool_ref(x: np.ndarray, kind: str, win: Window, count_include_pad: bool) -> np.ndarray:
    """ONNX pooling; an average's divisor counts the taps inside the input, plus, with
    count_include_pad, those on its pads (not those past the pads, which ceil_mode can make)."""
    if kind == "max":
        return np.max([t for _, _, t in taps(canvas(x, win, -np.inf), win)], axis=0)
    inside = canvas(np.ones(x.shape[-2:]), win, 0.0)
    padded = np.zeros_like(inside)
    padded[:x.shape[-2] + win.pads_begin[0] + win.pads_end[0], :x.shape[-1] + win.pads_begin[1] + win.pads_end[1]] = 1
    total = sum(t for _, _, t in taps(canvas(x, win, 0.0), win))
    count = sum(t for _, _, t in taps(padded if count_include_pad else inside, win))
    return total / count


def conv_case(b: Builder, rng: np.random.Generator) -> Case:
    grouping = ["dense", "depthwise", "grouped"][int(rng.integers(3))]
    if grouping == "dense":
        group, cg, mg = 1, int(rng.integers(1, 5)), int(rng.integers(1, 6))
    elif grouping == "depthwise":  # group = C, and M = C or 2C
        group, cg, mg = int(rng.integers(1, 5)), 1, int(rng.integers(1, 3))
    else:
        group, cg, mg = int(rng.integers(2, 4)), int(rng.integers(1, 4)), int(rng.integers(1, 4))
    n, c, m = int(rng.integers(1, 3)), group * cg, group * mg
    spatial, win = random_window(rng, "Conv", 5, dilated=True)
    x = random_operand(b, rng, (n, c) + spatial, ("plain", "permuted", "sliced"))
    w = b.const(rand(rng, (m, cg) + win.kernel))
    shape = (n, m) + win.out
    want = conv_ref(x.value, w.value, win, group)
    epi, note = Epilogue(), "none"
    if rng.random() < 0.6:
        bias = b.const(rand(rng, (m,))).reshape((m, 1, 1)).broadcast_to(shape)
        relu = bool(rng.random() < 0.5)
        epi = Epilogue(call("fmaxf", ACC + X, 0.0) if relu else ACC + X, (bias.view,))
        want = np.maximum(want + bias.value, 0.0) if relu else want + bias.value
        note = str(epi.expr)
    return Case(shape, lambda out: Conv(out, x.view, w.view, win, group, epi, "conv"), want,
                acc_atol(cg * win.kernel[0] * win.kernel[1], x.value, w.value),
                f"{grouping} group={group} x={x.note} w={w.note} {win} epilogue {note}")


def pool_case(b: Builder, rng: np.random.Generator) -> Case:
    kind = ["max", "avg"][int(rng.integers(2))]
    # count_include_pad is drawn for max pooling too, where it must change nothing
    ceil_mode, count_include_pad = (bool(f) for f in rng.random(2) < 0.5)
    spatial, win = random_window(rng, "MaxPool" if kind == "max" else "AveragePool", 4, kind == "max", ceil_mode)
    x = random_operand(b, rng, (int(rng.integers(1, 3)), int(rng.integers(1, 4))) + spatial,
                       ("plain", "permuted", "sliced"))
    shape = x.view.shape[:2] + win.out
    return Case(shape, lambda out: Pool(out, x.view, kind, win, count_include_pad, "pool"),
                pool_ref(x.value, kind, win, count_include_pad), acc_atol(win.kernel[0] * win.kernel[1], x.value),
                f"{kind} ceil_mode={ceil_mode} count_include_pad={count_include_pad} x={x.note} {win}")


# --- running a case ----------------------------------------------------------------------------

CASES = {"map": map_case, "reduce": reduce_case, "gemm": gemm_case, "conv": conv_case, "pool": pool_case}
PLACEMENTS = ("direct", "slice", "arena_copy", "arena_transpose", "arena_relu")


def place(b: Builder, case: Case, placement: str) -> tuple[list[Instr], np.ndarray]:
    """The instructions that put the case's result in the output, and the output they must produce."""
    shape, want = case.shape, case.want
    if placement == "direct":
        return [case.emit(b.output(shape))], want
    if placement == "slice":  # columns 1..n of a wider output, the others filled with -1 by maps
        n = shape[-1] if shape else 1
        wide = shape[:-1] + (n + 3,)
        whole = b.output(wide)
        axis = len(wide) - 1
        out = whole.slice(axis, 1, n).reshape(shape)
        fills = [Map(whole.slice(axis, start, length), (), lit(-1.0, np.float32), "fill")
                 for start, length in ((0, 1), (n + 1, 2))]
        expect = np.full(wide, -1.0)
        expect[..., 1:n + 1] = want.reshape(shape[:-1] + (n,))
        return [case.emit(out)] + fills, expect
    temp = b.arena(shape)
    if placement == "arena_copy":  # the copy into the output is elided: the kernel writes there
        return [case.emit(temp), Map(b.output(shape), (temp,), X, "copy")], want
    if placement == "arena_transpose":  # a strided copy stays a copy: the kernel writes the arena
        out = b.output(shape[::-1]).permute(tuple(reversed(range(len(shape)))))
        return [case.emit(temp), Map(out, (temp,), X, "transpose")], np.transpose(want)
    assert placement == "arena_relu"  # fused into maps and into conv and gemm epilogues
    return [case.emit(temp), Map(b.output(shape), (temp,), call("fmaxf", X, 0.0), "relu")], np.maximum(want, 0.0)


def check(kind: str, seed: int, placement: str = "direct") -> None:
    rng = np.random.default_rng([list(CASES).index(kind), seed])
    b = Builder()
    case = CASES[kind](b, rng)
    instrs, want = place(b, case, placement)
    (got,) = b.run(instrs)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=case.atol, err_msg=f"{placement}: {case.about}")


@pytest.mark.parametrize("seed", range(60))
def test_map(seed):
    check("map", seed)


@pytest.mark.parametrize("seed", range(50))
def test_reduce(seed):
    check("reduce", seed)


@pytest.mark.parametrize("seed", range(50))
def test_gemm(seed):
    check("gemm", seed)


@pytest.mark.parametrize("seed", range(50))
def test_conv(seed):
    check("conv", seed)


@pytest.mark.parametrize("seed", range(80))
def test_pool(seed):
    check("pool", seed)


@pytest.mark.parametrize("placement", PLACEMENTS)
@pytest.mark.parametrize("kind", list(CASES))
def test_output_placement(kind, placement):
    check(kind, 1000, placement)


@pytest.mark.parametrize("count_include_pad", [False, True])
def test_avg_pool_ceil_mode_divisor(count_include_pad):
    """By hand: 4x4 ones, kernel 3, stride 2, pads 1, ceil_mode: 3 windows per axis, at padded
    coordinates 0-2, 2-4 and 4-6; they hold 2, 3 and 1 input taps, and 3, 3 and 2 taps of the input
    and its pads (coordinate 6 is past the pads). Each output is a product of per-axis ratios."""
    b = Builder()
    x = b.input(np.ones((1, 1, 4, 4)))
    node = Node("AveragePool", "n", (), (), dict(strides=[2, 2], pads=[1, 1, 1, 1]))
    win = window(node, (4, 4), (3, 3), ceil_mode=True)
    assert win.out == (3, 3)
    ratio = np.array([2 / 3, 1.0, 1 / 2]) if count_include_pad else np.ones(3)
    want = np.outer(ratio, ratio).reshape(1, 1, 3, 3)
    np.testing.assert_allclose(pool_ref(x.value, "avg", win, count_include_pad), want, rtol=1e-12)
    (got,) = b.run([Pool(b.output((1, 1, 3, 3)), x.view, "avg", win, count_include_pad, "pool")])
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=MAP_ATOL)


@pytest.mark.parametrize("target, columns", [("x86-avx512", True), ("generic", True), ("cortex-m4", False)])
def test_a_pool_over_channels_last_sums_down_columns(target, columns):
    """A reduction whose innermost kept dim is contiguous and whose reduced ones are not (a global pool over
    channels last) keeps a row of accumulators and sums down columns on a target with vector registers, one
    accumulator at a time down each strided column on a scalar one (loops.py _column_sums); the same sums."""
    graph = helper.make_graph([helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)], "pool",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, (125, 64))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[helper.make_tensor("axes", TensorProto.INT64, (1,), [0])])
    compiled = cglow.compile_model(checked_model(graph), name="net", options=Options(target=target))
    assert ("float acc[64];" in compiled.c_source) == columns
    x = np.random.default_rng(0).standard_normal((125, 64)).astype(np.float32)
    (got,) = cglow.build(compiled)(x)
    np.testing.assert_allclose(got, x.astype(np.float64).sum(axis=0), rtol=1e-5, atol=1e-4)
