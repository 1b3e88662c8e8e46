"""Lowering of the quantized ops: the integer ops graph/quant/fold.py makes (IntConv, IntGemm, IntAdd, IntMul,
IntAvgPool, IntTable; the TFLite import makes them too, and IntBilinear), ConvInteger and MatMulInteger, and
the QuantizeLinear / DequantizeLinear maps that remain around ops kept in float.

Integer convolutions and matrix products accumulate int8 x int8 products in int32, subtract the input's
zero point as they load it (or fold it into the bias at compile time: a convolution's when nothing is padded,
a matrix product's when B is one constant matrix for every batch), and requantize each accumulator with a
fixed-point multiplier and shift per output channel (runtime_c/requant.c); the elementwise Add and Mul
requantize the same way: no float at run time."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto
from onnx.helper import tensor_dtype_to_np_dtype

from ...graph.geometry import window
from ...graph.ir import Node
from ...graph.quant.params import narrow
from ...graph.registry import OpSpec, declare
from ...graph.rules import quant as rules
from ...graph.rules.quant import FLOAT_QUANTIZED
from ...instr.expr import ACC, F32, Expr, Input, call, cast, clamp, gt, inputs, lit, select
from ...instr import nibbles
from ...instr.ir import Conv, Epilogue, Gather, Gemm, Map, Pool, Reduce, View
from ..context import Context
from .logic import from_float, to_float
from .nn import CHANNELS_LAST, _window_2d, as_2d

# made by graph passes or the TFLite import only (IntSoftmax and IntSoftmaxTable are lowered in int_softmax.py,
# HybridGemm and HybridConv in hybrid.py, IntLogistic, IntTanh, IntLstmCell, IntPeephole and IntLayerNorm in
# tflite_lstm.py)
I32 = np.dtype(np.int32)
X, Y, Z = inputs(3)


class _Operands:
    """Per-channel constants of an expression: a literal when uniform, else a view broadcast to the output."""

    def __init__(self, ctx: Context, shape: tuple[int, ...], axis: int, first: int = 0):
        self.ctx, self.shape, self.axis, self.first = ctx, shape, axis, first
        self.views: list[View] = []

    def __call__(self, data, label: str, dtype=I32) -> Expr:
        data = np.asarray(data).reshape(-1)
        if np.all(data == data[0]):
            return lit(data[0], dtype if np.dtype(dtype).kind in "iu" else F32)
        return self.view(self.ctx.const_view(data.astype(dtype), label))

    def view(self, values: View) -> Expr:
        """A 1-D view of values along the axis (a run-time input's, or a constant's)."""
        along = [1] * len(self.shape)
        along[self.axis] = values.size
        self.views.append(values.reshape(tuple(along)).broadcast_to(self.shape))
        return Input(self.first + len(self.views) - 1)


def requantized(node: Node, out_dtype: np.dtype, acc: Expr, c: _Operands, bound=None) -> Expr:
    """The expression storing a requantized accumulator `acc` (int32) as the output's type. `bound`: the
    largest magnitude the accumulator can reach (per channel, or one for all), where known: it may allow the
    cheaper cglow_requant_high, which takes each shift less 33. Shifts (1 to 62) are stored as int8. Ops from
    a .tflite file requantize as LiteRT's kernels do: with rounding "tflite", MultiplyByQuantizedMultiplier's
    two roundings (the shifts are TFLite's exponents; where tflite_high_fits, cglow_requant_tfl_high takes each
    multiplier M as 2M - 2^32 and the shifts negated); with "half_up", one rounding with halves up, which
    cglow_requant_high computes exactly wherever it applies (it rounds halves up)."""
    mults, shifts = np.asarray(node.attr("mult")), np.asarray(node.attr("shift"))
    rounding, zero = node.attr("rounding"), node.attr("y_zero")
    mult_label, label = "multipliers", "shifts"
    if rounding == "tflite" and tflite_high_fits(mults, shifts, zero, bound):
        helper, mults, shifts = "cglow_requant_tfl_high", 2 * mults.astype(np.int64) - (1 << 32), -shifts
        mult_label, label = "multipliers M as 2M - 2^32", "shifts negated"
    elif rounding == "tflite":
        helper = "cglow_requant_tfl"
    elif (rounding == "half_up" and np.all(shifts > 32) or bound is not None and never_halfway(mults, shifts, bound)) \
            and offset_fits(zero, shifts):
        helper, shifts, label = "cglow_requant_high", shifts - 33, "shifts less 33"
    else:
        helper = "cglow_requant_up" if rounding == "half_up" else "cglow_requant"
    mult = c(mults, f"{node.name} {mult_label}")
    shift = c(shifts, f"{node.name} {label}", np.int8)
    return cast(out_dtype, call(helper, acc, mult, shift, zero, node.attr("lo"), node.attr("hi")))


def never_halfway(mults: np.ndarray, shifts: np.ndarray, bound) -> bool:
    """Whether cglow_requant_high gives cglow_requant's results: every shift is above 32 (then the product's
    low word never moves the floor), and no accumulator of magnitude up to `bound` is exactly halfway between
    two results. That takes acc * multiplier = an odd multiple of 2^(shift - 1), so |acc| >= 2^(shift - 1 - v)
    where 2^v is the largest power of two dividing the multiplier."""
    mults, shifts = mults.astype(np.int64).reshape(-1), shifts.astype(np.int64).reshape(-1)
    bounds = np.broadcast_to(np.asarray(bound, np.int64).reshape(-1), mults.shape)
    if np.any(shifts <= 32):
        return False
    return all(m == 0 or b < 1 << max(s - 1 - ((m & -m).bit_length() - 1), 0)
               for m, s, b in zip(mults.tolist(), shifts.tolist(), bounds.tolist()))


def tflite_high_fits(mults: np.ndarray, shifts: np.ndarray, zero: int, bound) -> bool:
    """Whether cglow_requant_tfl_high gives cglow_requant_tfl's results: the accumulators are known to stay below
    2^30 in magnitude, every multiplier is 2^30 or more, every shift (TFLite's exponent) -1 or below, and the zero
    point's term (1 + 2 zero) 2^(r - 1) below 2^29."""
    return bound is not None and np.max(bound) < 1 << 30 and bool(np.all(mults >= 1 << 30)) and \
        bool(np.all(shifts <= -1)) and abs(1 + 2 * zero) << int(-1 - np.min(shifts)) < 1 << 29


def offset_fits(zero: int, shifts: np.ndarray) -> bool:
    """Whether cglow_requant_high may add the doubled zero point plus one to the product's high word before its
    shifts: times 2^(shift - 33), it stays below 2^30 in magnitude."""
    return abs(1 + 2 * zero) << max(int(np.max(shifts)) - 33, 0) < 1 << 30


def _reach(dtype: np.dtype, zero: int) -> int:
    """The largest |value - zero| of an integer type."""
    info = np.iinfo(dtype)
    return max(abs(int(info.min) - zero), abs(int(info.max) - zero))


def _with_bias(bias: np.ndarray, c: _Operands, label: str) -> tuple[Expr, int | None]:
    """The accumulator in an epilogue's expression, and the epilogue input it starts at (Epilogue.init): a
    bias per channel is that input; one for every channel, a literal added in the expression."""
    if not np.any(bias):
        return ACC, None
    views = len(c.views)
    term = c(bias, label)
    return (ACC, c.first + views) if len(c.views) > views else (ACC + term, None)


def _less_zero(ctx: Context, node: Node, i: int, axis: int) -> tuple[View, np.ndarray | None]:
    """An integer op's input i less its zero point (input i + 2, per tensor or along `axis`; 0 where the node has
    none): a narrow constant where both are constants, else computed into int16 at run time (the input itself
    where its zero point is a constant 0). The constant's values are returned too."""
    name, zero_name = node.inputs[i], node.inputs[i + 2] if len(node.inputs) > i + 2 else ""
    zero = ctx.const(zero_name) if zero_name else np.zeros(1, np.int64)
    data = ctx.const(name)
    if data is not None and zero is not None:
        shape = [1] * data.ndim
        shape[axis] = -1
        zero = zero.astype(np.int64).reshape(shape if zero.size > 1 else [1] * data.ndim)
        values = narrow(data.astype(np.int64) - zero)
        return ctx.const_view(values, name), values
    view = ctx.view(name)
    if zero is not None and not np.any(zero):
        return view, None
    out = ctx.temp(view.shape, f"{name} minus zero point", np.int16)
    c = _Operands(ctx, view.shape, axis, first=1)
    term = c.view(ctx.view(zero_name)) if zero is None else c(zero.reshape(-1), f"{name} zero points", np.int16)
    ctx.emit(Map(out, (view,) + tuple(c.views), cast(np.int16, X - term), f"{name} zero points"))
    return out, None


def _conv(ctx: Context, node: Node, x: View, w: View, w_values, bias: np.ndarray, x_zero: int, raw: bool) -> None:
    """out = requant(bias + sum (x - x_zero) * w) (raw: the int32 sum itself)."""
    w_shape = w.shape
    win = window(node, x.shape[2:], tuple(node.attr("kernel_shape", w_shape[2:])))
    if x_zero and w_values is not None and not any(win.pads_begin + win.pads_end):
        bias = bias - x_zero * w_values.reshape(w_shape[0], -1).sum(axis=1, dtype=np.int64)
        x_zero = 0
    out = ctx.new(node.outputs[0], CHANNELS_LAST.get(len(w_shape)))
    x_dtype = ctx.dtype(node.inputs[0])
    x, out, win = as_2d(x), as_2d(out), _window_2d(win)
    c = _Operands(ctx, out.shape, 1)
    acc, init = _with_bias(bias, c, f"{node.name} bias")
    bound = None if raw or w_values is None else np.abs(bias) + _reach(x_dtype, x_zero) * \
        np.abs(w_values.astype(np.int64)).reshape(w_shape[0], -1).sum(axis=1)
    expr = acc if raw else requantized(node, ctx.dtype(node.outputs[0]), acc, c, bound)
    ctx.emit(Conv(out, x, as_2d(w), win, node.attr("group", 1), Epilogue(expr, tuple(c.views), init), node.name,
                  x_zero=x_zero))


def _int_conv(ctx: Context, node: Node) -> None:
    w = ctx.const(node.inputs[1])
    _conv(ctx, node, ctx.view(node.inputs[0]), ctx.view(node.inputs[1]), w,
          ctx.const(node.inputs[2]).astype(np.int64), node.attr("x_zero"), raw=False)


def _zero(ctx: Context, node: Node, i: int) -> int | None:
    """An integer op's scalar zero point `i`: 0 where the node has none, None where it is given at run time."""
    if len(node.inputs) <= i or not node.inputs[i]:
        return 0
    data = ctx.const(node.inputs[i])
    return None if data is None else int(data.reshape(-1)[0])


def _conv_integer(ctx: Context, node: Node) -> None:
    """The input's zero point is the kernel's (it subtracts it as it loads, padding reading as 0) where it is a
    constant, else subtracted first, as the weights' is where either is given at run time."""
    w, values = _less_zero(ctx, node, 1, 0)
    x_zero = _zero(ctx, node, 2)
    x = ctx.view(node.inputs[0]) if x_zero is not None else _less_zero(ctx, node, 0, 0)[0]
    _conv(ctx, node, x, w, values, np.zeros(ctx.shape(node.inputs[1])[0], np.int64), x_zero or 0, raw=True)


def _gemm(ctx: Context, node: Node, a: View, b: View, b_values, bias: np.ndarray, zeros: tuple[int, int],
          raw: bool, a_dtype: np.dtype) -> None:
    """out = requant(bias + sum (a - za)(b - zb)) over [*batch, M, K] x [*batch, K, N] (raw: the int32 sum)."""
    a = a.reshape((1,) + a.shape) if len(a.shape) == 1 else a
    b = b.reshape(b.shape + (1,)) if len(b.shape) == 1 else b
    if zeros[0] and b_values is not None and b_values.size == b.shape[-2] * b.shape[-1]:
        # one constant B for every batch, and no padding in a matrix product: a's zero point is a bias (times
        # the sums of B less its own zero point, which the product still subtracts)
        bias = bias - zeros[0] * (b_values.reshape(b.shape[-2:]).astype(np.int64) - zeros[1]).sum(axis=0)
        zeros = (0, zeros[1])
    batch = ctx.shape(node.outputs[0])[:max(len(a.shape), len(b.shape)) - 2]
    out = ctx.new(node.outputs[0]).reshape(batch + (a.shape[-2], b.shape[-1]))
    c = _Operands(ctx, out.shape, len(out.shape) - 1)
    acc, init = _with_bias(bias, c, f"{node.name} bias")
    bound = None if raw or b_values is None else np.abs(bias) + _reach(a_dtype, zeros[0]) * np.abs(
        b_values.astype(np.int64) - zeros[1]).reshape((-1,) + b.shape[-2:]).sum(axis=1).max(axis=0)
    expr = acc if raw else requantized(node, ctx.dtype(node.outputs[0]), acc, c, bound)
    ctx.emit(Gemm(out, a.broadcast_to(batch + a.shape[-2:]), b.broadcast_to(batch + b.shape[-2:]),
                  Epilogue(expr, tuple(c.views), init), node.name, zeros=zeros))


def _int_gemm(ctx: Context, node: Node) -> None:
    a, b = ctx.view(node.inputs[0]), ctx.view(node.inputs[1])
    values = ctx.const(node.inputs[1])
    if node.attr("transA", 0):
        a = a.permute((1, 0))
    if node.attr("transB", 0):
        b = b.permute((1, 0))
        values = None if values is None else values.T
    _gemm(ctx, node, a, b, values, ctx.const(node.inputs[2]).astype(np.int64),
          (node.attr("a_zero"), node.attr("b_zero")), raw=False, a_dtype=ctx.dtype(node.inputs[0]))


def _matmul_integer(ctx: Context, node: Node) -> None:
    """A's zero point is the product's where it is a constant, else subtracted first, as B's is."""
    b, values = _less_zero(ctx, node, 1, len(ctx.shape(node.inputs[1])) - 1)
    n = ctx.shape(node.inputs[1])[-1]
    a_zero = _zero(ctx, node, 2)
    a = ctx.view(node.inputs[0]) if a_zero is not None else _less_zero(ctx, node, 0, 0)[0]
    _gemm(ctx, node, a, b, values, np.zeros(n, np.int64), (a_zero or 0, 0), raw=True, a_dtype=ctx.dtype(node.inputs[0]))


def _binary(ctx: Context, node: Node) -> None:
    """Add: (a - za) fa + (b - zb) fb, Mul: (a - za)(b - zb), each requantized (per tensor). TFLite's Add (or
    Sub) scales each input, times 2^left, by its own fixed-point factor before the sum is requantized."""
    a, b = X - node.attr("a_zero"), Y - node.attr("b_zero")
    if node.attr("rounding") == "tflite":
        a, b = (call("cglow_scale_tfl", x * (1 << node.attr("left")), node.attr(f"{k}_mult"), node.attr(f"{k}_shift"))
                for x, k in ((a, "a"), (b, "b"))) if node.op == "IntAdd" else (a, b)
        acc = (a - b if node.attr("subtract") else a + b) if node.op == "IntAdd" else a * b
    else:
        acc = a * node.attr("a_factor") + b * node.attr("b_factor") if node.op == "IntAdd" else a * b
    c = _Operands(ctx, ctx.shape(node.outputs[0]), 0)
    expr = requantized(node, ctx.dtype(node.outputs[0]), acc, c)
    assert not c.views, "an elementwise requantization is per tensor"
    ctx.elementwise(node, expr)


def _average(ctx: Context, node: Node) -> None:
    """The sum over each window, requantized (from a .tflite file: TFLite's MEAN, which has a multiplier, or
    AVERAGE_POOL_2D, the sum divided by the count rounded half away from zero). Windows that reach past the
    input (a TFLite SAME padding) are a Pool over the taps inside it, which divides by their count."""
    x = ctx.view(node.inputs[0])
    kernel, strides = tuple(node.attr("kernel_shape")), tuple(node.attr("strides"))
    out = ctx.new(node.outputs[0], x.order() if len(x.shape) == len(ctx.shape(node.outputs[0])) else None)
    if any(node.attr("pads", ())):  # its translation clamps after it, for a fused activation
        assert node.attr("lo") is None and node.attr("x_zero") == 0, f"{node.describe()}: a padded window sums the " \
            f"integers themselves, and takes no clamp"
        ctx.emit(Pool(out, x, "avg", window(node, x.shape[2:], kernel), False, node.name))
        return
    spatial = x.shape[2:]
    outs = tuple((n - k) // s + 1 for n, k, s in zip(spatial, kernel, strides))
    windows = View(x.buf, x.offset, x.shape[:2] + outs + kernel,
                   x.strides[:2] + tuple(st * s for st, s in zip(x.strides[2:], strides)) + x.strides[2:])
    c = _Operands(ctx, out.shape, 1)
    if node.attr("mult") is None:  # the sum divided by the count, rounded half away from zero
        half, count = int(np.prod(kernel)) // 2, int(np.prod(kernel))
        post = cast(ctx.dtype(node.outputs[0]), clamp(select(gt(ACC, 0), ACC + half, ACC - half) / count,
                                                      node.attr("lo"), node.attr("hi")))
    else:
        post = requantized(node, ctx.dtype(node.outputs[0]), ACC, c)
    ctx.emit(Reduce(out, (windows,), "sum", X - node.attr("x_zero"), post, node.name))


def _affine(ctx: Context, node: Node) -> None:
    """out = requant((x - x_zero) * factor + offset), factor and offset per channel (axis 1)."""
    x = ctx.view(node.inputs[0])
    c = _Operands(ctx, x.shape, 1, first=1)
    acc = (X - node.attr("x_zero")) * c(ctx.const(node.inputs[1]), f"{node.name} factors") + \
        c(ctx.const(node.inputs[2]), f"{node.name} offsets")
    expr = requantized(node, ctx.dtype(node.outputs[0]), acc, c)
    ctx.emit(Map(ctx.new_like(node.outputs[0], [x]), (x,) + tuple(c.views), expr, node.name))


def _table(ctx: Context, node: Node) -> None:
    """out = table[x]: a Gather from the 256 entries (a negative int8 index counts from the end)."""
    x = ctx.view(node.inputs[0])
    lookup(ctx, ctx.new_like(node.outputs[0], [x]), ctx.view(node.inputs[1]), x, node.name)


def lookup(ctx: Context, out: View, table: View, index: View, name: str) -> None:
    """out = table[index] elementwise, index an 8-bit view in out's shape and table a view of 256 entries."""
    data = View(table.buf, table.offset, index.shape, (0,) * len(index.shape))
    ctx.emit(Gather(out, data, index, 256, table.strides[0], name))


def _taps(ctx: Context, node: Node, x: View, axis: int, table, dtype) -> tuple[View, View, View, View]:
    """x's lower and upper tap of each output index along `axis`, gathered into `dtype` temporaries, and
    their weights, all views in the gathered shape."""
    lows, highs, w_lows, w_highs = (np.asarray(t) for t in table)
    shape = x.shape[:axis] + (lows.size,) + x.shape[axis + 1:]
    along = tuple(-1 if d == axis else 1 for d in range(len(shape)))
    data = View(x.buf, x.offset, shape, x.strides[:axis] + (0,) + x.strides[axis + 1:])
    views = []
    for values, label in ((lows, "lower taps"), (highs, "upper taps")):
        index = ctx.const_view(values.astype(np.int32), f"{node.name} {label}").reshape(along).broadcast_to(shape)
        views.append(ctx.temp(shape, f"{node.name} {label}", dtype))
        ctx.emit(Gather(views[-1], data, index, x.shape[axis], x.strides[axis], node.name))
    for values, label in ((w_lows, "lower weights"), (w_highs, "upper weights")):
        views.append(ctx.const_view(values.astype(np.int32), f"{node.name} {label}").reshape(along).broadcast_to(shape))
    return tuple(views)


def _bilinear(ctx: Context, node: Node) -> None:
    """TFLite's 8-bit bilinear resize of NHWC values (axes 1 and 2): the sum of four neighbours times products
    of Q10 weights, divided by 2^20 rounding halves away from zero. The weights are separable, so the rows are
    weighted first (int32), then the columns: the same integer sums as the reference's."""
    x = ctx.view(node.inputs[0])
    weighted = cast(I32, X) * Z + cast(I32, Y) * Input(3)
    rows = _taps(ctx, node, x, 1, node.attr("rows"), ctx.dtype(node.inputs[0]))
    mid = ctx.temp(rows[0].shape, f"{node.name} rows", I32)
    ctx.emit(Map(mid, rows, weighted, node.name))
    cols = _taps(ctx, node, mid, 2, node.attr("cols"), I32)
    half, one = 1 << 19, 1 << 20
    ctx.emit(Map(ctx.new(node.outputs[0]), cols, cast(ctx.dtype(node.outputs[0]),
                                                      select(gt(weighted, 0), weighted + half, weighted - half) / one),
                 node.name))


Piece = tuple[View, View, tuple[View, ...], Expr, "Expr | None"]


def _pieces(ctx: Context, node: Node, quantized: np.dtype, x: View) -> list[Piece]:
    """A QuantizeLinear's or DequantizeLinear's input view x and output view, and its scale's and zero point's
    operands ({1} on) over them: literals, or views of constants or of run-time inputs, per tensor, along an axis,
    or in blocks along it (rules/quant.py). The zero point is a float for the float types quantized to (their bits
    converted), None where the node has none. One piece, or for blocks, one for the whole blocks (that axis
    split in two, the parameters' stride 0 along the block) and one for a last shorter block."""
    out = ctx.new_like(node.outputs[0], [x])
    if not node.attr("block_size", 0):
        views, scale, zero = _per_axis(ctx, node, x.shape, quantized)
        return [(x, out, views, scale, zero)]
    at = node.attr("axis", 1) % len(x.shape)
    block = node.attr("block_size")
    whole, rest = divmod(x.shape[at], block)
    params = [ctx.view(name) for name in node.inputs[1:3] if name]
    pieces = []
    if whole:
        split = [_blocks(v.slice(at, 0, whole * block), at, block) for v in (x, out)]
        views = tuple(_along_blocks(p.slice(at, 0, whole), at, block) for p in params)
        pieces.append((*split, views, *_terms(node, quantized, len(views))))
    if rest:
        views = tuple(p.slice(at, whole, 1).broadcast_to(x.slice(at, whole * block, rest).shape) for p in params)
        pieces.append((x.slice(at, whole * block, rest), out.slice(at, whole * block, rest), views,
                       *_terms(node, quantized, len(views))))
    return pieces


def _blocks(view: View, at: int, block: int) -> View:
    """The view with dim `at` split into (its length / block, block)."""
    return View(view.buf, view.offset, view.shape[:at] + (view.shape[at] // block, block) + view.shape[at + 1:],
                view.strides[:at] + (block * view.strides[at], view.strides[at]) + view.strides[at + 1:])


def _along_blocks(view: View, at: int, block: int) -> View:
    """A parameter's view with a dim of `block` after `at` over which it stays (stride 0)."""
    return View(view.buf, view.offset, view.shape[:at + 1] + (block,) + view.shape[at + 1:],
                view.strides[:at + 1] + (0,) + view.strides[at + 1:])


def _terms(node: Node, quantized: np.dtype, count: int) -> tuple[Expr, Expr | None]:
    """The scale and the zero point as inputs {1} and {2} of a map (none: an integer type's 0, a float type's
    None)."""
    if count < 2:
        return Input(1), None if quantized in FLOAT_QUANTIZED else lit(0, I32)
    return Input(1), to_float(quantized, Input(2)) if quantized in FLOAT_QUANTIZED else Input(2)


def _per_axis(ctx: Context, node: Node, shape: tuple[int, ...], quantized: np.dtype) -> tuple[tuple[View, ...], Expr,
                                                                                              Expr | None]:
    """The scale and zero point as expression operands ({1} on), per tensor or along the quantization axis:
    literals or views of constants, or views of run-time inputs. An integer type's zero point is 0 where the node
    has none, a float type's None; a float type's constant zero point is converted now."""
    axis = 0 if ctx.graph.types[node.inputs[1]].size == 1 else node.attr("axis", 1) % len(shape)
    c = _Operands(ctx, shape, axis, first=1)
    scale = ctx.const(node.inputs[1])
    terms = [c.view(ctx.view(node.inputs[1])) if scale is None else c(scale, f"{node.name} scales", np.float32)]
    name = node.inputs[2] if len(node.inputs) > 2 else ""
    zero = ctx.const(name) if name else None
    if quantized in FLOAT_QUANTIZED:
        terms.append(None if not name else to_float(quantized, c.view(ctx.view(name))) if zero is None else
                     c(zero.astype(np.float32), f"{node.name} zero points", np.float32))
    else:
        terms.append(c.view(ctx.view(name)) if name and zero is None else
                     c(np.zeros(1, I32) if zero is None else zero, f"{node.name} zero points", I32))
    return tuple(c.views), terms[0], terms[1]


def _quantize(ctx: Context, node: Node) -> None:
    """saturate(round half to even(x / scale) + zero point); TFLite's QUANTIZE (rounding "tflite") rounds
    halves away from zero. To a float type: x / scale plus the zero point (where the node has one) rounded to
    it as Cast rounds, saturating as `saturate` says (float4 always saturates)."""
    out = ctx.dtype(node.outputs[0])
    for x, y, views, scale, zero in _pieces(ctx, node, out, ctx.view(node.inputs[0])):
        quotient = _quotient(node, scale)
        if out in FLOAT_QUANTIZED:
            expr = from_float(out, quotient if zero is None else quotient + zero, node.attr("saturate", 1))
        else:
            info = np.iinfo(out)
            helper = "cglow_quantize_tfl" if node.attr("rounding") == "tflite" else "cglow_quantize"
            expr = cast(out, call(helper, quotient, zero, int(info.min), int(info.max)))
        ctx.emit(Map(y, (x,) + views, expr, node.name))


def _quotient(node: Node, scale: Expr) -> Expr:
    """x / scale in the precision the node's `precision` names: float32, or float16 or bfloat16, where x, the
    scale and their float32 quotient are each rounded to it (that quotient of two of its values, rounded, is their
    correctly rounded quotient: 24 bits are at least twice its precision plus 2)."""
    if node.attr("precision", 0) in (0, TensorProto.FLOAT):
        return X / scale
    narrow_type = np.dtype(tensor_dtype_to_np_dtype(node.attr("precision")))

    def rounded(value: Expr) -> Expr:
        return to_float(narrow_type, from_float(narrow_type, value, 1))
    return rounded(rounded(X) / rounded(scale))


def _dequantize(ctx: Context, node: Node) -> None:
    """(x - zero point) * scale; a float type's x and zero point converted to float. Constant 4-bit values (int4
    or uint4 weights, widened to 8 bits on import) are stored two per byte and unpacked by the maps (instr/nibbles.py),
    where every piece of the map keeps pairs whole: the last dim even, blocks along it of an even size."""
    source, data = ctx.dtype(node.inputs[0]), ctx.const(node.inputs[0])
    block, rank = node.attr("block_size", 0), len(ctx.shape(node.inputs[0]))
    packed = nibbles.packable(data) and not (block % 2 and node.attr("axis", 1) % rank == rank - 1)
    x = View.of(ctx.const_view(nibbles.pack(data), f"{node.inputs[0]} two per byte").buf, data.shape) if packed \
        else ctx.view(node.inputs[0])
    for x, y, views, scale, zero in _pieces(ctx, node, source, x):
        if source in FLOAT_QUANTIZED:
            value = to_float(source) if zero is None else to_float(source) - zero
        else:
            value = cast(F32, X - zero)
        maps = nibbles.unpacked_maps(x, y, views, value * scale, source == np.int8, node.name) if packed else \
            [Map(y, (x,) + views, value * scale, node.name)]
        for m in maps:
            ctx.emit(m)


declare({
    "ConvInteger": OpSpec(rules.conv_integer, _conv_integer),
    "DequantizeLinear": OpSpec(rules.dequantize, _dequantize, int8="table"),
    "IntAdd": OpSpec(None, _binary),
    "IntAffine": OpSpec(None, _affine),
    "IntAvgPool": OpSpec(None, _average),
    "IntBilinear": OpSpec(None, _bilinear),
    "IntConv": OpSpec(None, _int_conv),
    "IntGemm": OpSpec(None, _int_gemm),
    "IntMul": OpSpec(None, _binary),
    "IntTable": OpSpec(None, _table),
    "MatMulInteger": OpSpec(rules.matmul_integer, _matmul_integer),
    "QuantizeLinear": OpSpec(rules.quantize, _quantize),
})
