"""TFLite operators that slice, split, stack, gather, resize, multiply batches of matrices and transpose
convolutions, float32 and int8, against LiteRT's reference kernels: 8-bit results to the bit, float ones within
1e-5."""
from __future__ import annotations

import numpy as np
import pytest

from tests.util import need_module

need_module("ai_edge_litert")

import cglow
from cglow.errors import CglowError
from tests.tflite_net import KINDS, Net, check

QUANT = dict(scale=0.07, zero=-3)  # the one scale and zero point of ops that move 8-bit values


def const(net: Net, name: str, values, dtype=np.int32) -> int:
    values = np.asarray(values, dtype)
    return net.w.tensor(name, values.shape, dtype, values)


@pytest.mark.parametrize("int8", KINDS)
@pytest.mark.parametrize("begin,end,strides,masks,out", [
    ([0, 1, 0, 2], [1, 5, 6, 7], [1, 2, 1, 2], {}, [1, 2, 6, 3]),
    ([0, -1, 5, 0], [1, 0, 0, 7], [1, -1, -2, 3], {"begin_mask": 0b0010}, [1, 4, 3, 3]),
    ([0, 2, 0, -3], [1, 3, 6, -1], [1, 1, 1, 1], {"shrink_axis_mask": 0b0011, "end_mask": 0b1000}, [6, 3]),
    ([0, 1], [0, 3], [1, 1], {"ellipsis_mask": 0b01}, [1, 5, 6, 2]),
    ([0, 1, 0], [0, 4, 0], [1, 1, 1], {"new_axis_mask": 0b100, "begin_mask": 0b1, "end_mask": 0b1}, [1, 3, 1, 6, 7]),
    ([-9, 0, 9], [9, 9, -9], [1, 2, -1], {}, [1, 3, 6, 7]),
])
def test_strided_slice(int8, begin, end, strides, masks, out, tmp_path):
    net = Net(int8, seed=20)
    x = net.input("x", [1, 5, 6, 7], **QUANT)
    y = net.value("y", out, **QUANT)
    net.w.op("STRIDED_SLICE", [x, const(net, "begin", begin), const(net, "end", end), const(net, "strides", strides)],
             [y], masks)
    check(net, [y], tmp_path)


@pytest.mark.parametrize("int8", KINDS)
def test_split_and_split_v(int8, tmp_path):
    net = Net(int8, seed=21)
    x = net.input("x", [2, 6, 5], **QUANT)
    parts = [net.value(f"p{i}", [2, 2, 5], **QUANT) for i in range(3)]
    net.w.op("SPLIT", [const(net, "axis", -2), x], parts, {"num_splits": 3})
    pieces = [net.value(f"v{i}", [2, 6, n], **QUANT) for i, n in enumerate([1, 3, 1])]
    net.w.op("SPLIT_V", [x, const(net, "sizes", [1, -1, 1]), const(net, "axis2", 2)], pieces, {"num_splits": 3})
    check(net, parts + pieces, tmp_path)


@pytest.mark.parametrize("int8", KINDS)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_pack_and_unpack(int8, axis, tmp_path):
    net = Net(int8, seed=22)
    a, b, c = (net.input(n, [4, 3], **QUANT) for n in "abc")
    shape = [4, 3]
    shape.insert(axis % 3, 3)
    y = net.value("y", shape, **QUANT)
    net.w.op("PACK", [a, b, c], [y], {"axis": axis, "values_count": 3})
    outs = [net.value(f"u{i}", [s for k, s in enumerate(shape) if k != 0], **QUANT) for i in range(shape[0])]
    net.w.op("UNPACK", [y], outs, {"num": shape[0], "axis": 0})
    check(net, [y] + outs, tmp_path)


class Indexed(Net):
    """A net whose inputs may include int32 indices into an axis of `length` (the tensors in `indices`)."""

    def __init__(self, int8: bool, seed: int, length: int):
        super().__init__(int8, seed)
        self.length, self.indices = length, set()

    def data(self):
        values = iter(Net.data(self))
        for t, shape in self.inputs:
            value = next(values)
            yield self.rng.integers(0, self.length, shape).astype(np.int32) if t in self.indices else value


@pytest.mark.parametrize("int8", KINDS)
@pytest.mark.parametrize("axis,computed", [(1, False), (-1, True), (0, True)])
def test_gather(int8, axis, computed, tmp_path):
    shape = [3, 5, 4]
    net = Indexed(int8, seed=23, length=shape[axis])
    x = net.input("x", shape, **QUANT)
    if computed:
        idx = net.w.tensor("idx", [2, 3], np.int32)
        net.inputs.append((idx, (2, 3)))
        net.indices.add(idx)
    else:
        idx = const(net, "idx", [[4, 0, 2], [1, 1, 3]])
    out = shape[:axis % 3] + [2, 3] + shape[axis % 3 + 1:]
    y = net.value("y", out, **QUANT)
    net.w.op("GATHER", [x, idx], [y], {"axis": axis})
    check(net, [y], tmp_path)


def test_moving_ops_need_one_scale(tmp_path):
    net = Net(True, seed=24)
    x = net.input("x", [4, 6], scale=0.1, zero=0)
    y = net.value("y", [4, 3], scale=0.2, zero=0)
    net.w.op("STRIDED_SLICE", [x, const(net, "b", [0, 0]), const(net, "e", [4, 6]), const(net, "s", [1, 2])], [y])
    path = tmp_path / "m.tflite"
    path.write_bytes(net.w.build([x], [y]))
    with pytest.raises(CglowError, match="different scales or zero points"):
        cglow.compile_model(path)


@pytest.mark.parametrize("int8", KINDS)
@pytest.mark.parametrize("shape,axes,keep,out", [
    ([1, 5, 6, 7], [1, 2], True, [1, 1, 1, 7]), ([2, 7, 9, 3], [2, -3], False, [2, 3]),
    ([1, 4, 300], [2], True, [1, 4, 1]), ([3, 4, 5], [0, 2], False, [4])])
def test_mean(int8, shape, axes, keep, out, tmp_path):
    net = Net(int8, seed=25)
    x = net.input("x", shape, scale=0.05, zero=-7)
    y = net.value("y", out, scale=0.011, zero=4)
    net.w.op("MEAN", [x, const(net, "axes", axes)], [y], {"keep_dims": keep})
    check(net, [y], tmp_path)


@pytest.mark.parametrize("int8", KINDS)
@pytest.mark.parametrize("size,kernel,stride,act", [(7, 3, 2, "NONE"), (8, 3, 2, "RELU6"), (6, 4, 1, "RELU")])
def test_average_pool_same_padding(int8, size, kernel, stride, act, tmp_path):
    net = Net(int8, seed=26)
    quant = dict(scale=0.05, zero=-9)
    x = net.input("x", [1, size, size + 1, 5], **quant)
    y = net.value("y", [1, -(-size // stride), -(-(size + 1) // stride), 5], **quant)
    net.w.op("AVERAGE_POOL_2D", [x], [y], {"padding": "SAME", "stride_w": stride, "stride_h": stride,
                                           "filter_width": kernel, "filter_height": kernel,
                                           "fused_activation_function": act})
    check(net, [y], tmp_path)


@pytest.mark.parametrize("int8", KINDS)
@pytest.mark.parametrize("a,b,adj_x,adj_y,out", [
    ([2, 3, 5], [2, 5, 4], False, False, [2, 3, 4]), ([2, 5, 3], [5, 4], True, False, [2, 3, 4]),
    ([1, 3, 5], [2, 1, 4, 5], False, True, [2, 1, 3, 4]), ([3, 6], [6, 7], False, False, [3, 7])])
def test_batch_matmul(int8, a, b, adj_x, adj_y, out, tmp_path):
    net = Net(int8, seed=27)
    x = net.input("a", a, scale=0.05, zero=-6)
    w = net.input("b", b, scale=0.03, zero=5)
    y = net.value("y", out, scale=0.2, zero=-1)
    net.w.op("BATCH_MATMUL", [x, w], [y], {"adj_x": adj_x, "adj_y": adj_y})
    check(net, [y], tmp_path)


@pytest.mark.parametrize("int8", KINDS)
@pytest.mark.parametrize("size,kernel,stride,padding,out,bias,act", [
    (4, 3, 2, "SAME", 8, True, "NONE"), (5, 3, 2, "VALID", 11, False, "RELU"), (4, 4, 2, "SAME", 7, True, "NONE"),
    (3, 2, 3, "VALID", 9, True, "RELU6"), (5, 3, 1, "SAME", 5, True, "NONE"), (4, 3, 2, "VALID", 10, True, "NONE"),
    (4, 1, 2, "VALID", 7, False, "NONE")])
def test_transpose_conv(int8, size, kernel, stride, padding, out, bias, act, tmp_path):
    net = Net(int8, seed=28)
    x = net.input("x", [1, size, size + 1, 3])
    w, scales = net.weights("w", [5, kernel, kernel, 3])
    out_w = out + stride  # the input is one pixel wider
    shape = const(net, "shape", [1, out, out_w, 5])
    inputs = [shape, w, x] + ([net.bias("b", 5, net.scale(x), scales)] if bias else [])
    y = net.value("y", [1, out, out_w, 5], scale=0.4 if int8 else None)
    net.w.op("TRANSPOSE_CONV", inputs, [y], {"padding": padding, "stride_w": stride, "stride_h": stride,
                                             "fused_activation_function": act}, version=4 if act != "NONE" else 1)
    check(net, [y], tmp_path)


RESIZES = [((4, 5), (8, 10), False, False), ((4, 5), (7, 3), True, False), ((4, 5), (9, 13), False, True),
           ((6, 7), (3, 4), False, True), ((3, 3), (1, 5), True, False), ((5, 4), (5, 4), False, False)]


@pytest.mark.parametrize("int8", KINDS)
@pytest.mark.parametrize("op", ["RESIZE_NEAREST_NEIGHBOR", "RESIZE_BILINEAR"])
@pytest.mark.parametrize("size,out,align,half", RESIZES)
def test_resize(int8, op, size, out, align, half, tmp_path):
    net = Net(int8, seed=29)
    x = net.input("x", [2, *size, 3], **QUANT)
    y = net.value("y", [2, *out, 3], **QUANT)
    net.w.op(op, [x, const(net, "size", out)], [y], {"align_corners": align, "half_pixel_centers": half})
    check(net, [y], tmp_path)


@pytest.mark.parametrize("int8", KINDS)
def test_reshape_edge_cases(int8, tmp_path):
    """RESHAPE from a shape input holding -1 and to a scalar, SQUEEZE without squeeze_dims, EXPAND_DIMS at a
    negative axis."""
    net = Net(int8, seed=30)
    x = net.input("x", [1, 3, 1, 4], **QUANT)
    s = net.value("s", [3, 4], **QUANT)
    net.w.op("SQUEEZE", [x], [s])
    r = net.value("r", [2, 6], **QUANT)
    net.w.op("RESHAPE", [s, const(net, "shape", [-1, 6])], [r])
    e = net.value("e", [2, 6, 1], **QUANT)
    net.w.op("EXPAND_DIMS", [r, const(net, "axis", [-1])], [e])
    one = net.input("one", [1], **QUANT)
    scalar = net.value("scalar", [], **QUANT)
    net.w.op("RESHAPE", [one, const(net, "empty", np.zeros(0, np.int32))], [scalar])
    check(net, [e, scalar], tmp_path)


@pytest.mark.parametrize("op,inputs,options,message", [
    ("STRIDED_SLICE", ([0, 3], [4, 0], [1, -1]), {"shrink_axis_mask": 0b10}, "negative stride"),
    ("STRIDED_SLICE", ([0, 0], [4, 6], [1, 1]), {"ellipsis_mask": 0b11}, "more than one ellipsis"),
    ("GATHER", ([1, 2],), {"batch_dims": 1}, "batch_dims 1 is not supported"),
])
def test_refused_options(op, inputs, options, message, tmp_path):
    net = Net(False, seed=31)
    x = net.input("x", [4, 6])
    y = net.value("y", [4, 2])
    net.w.op(op, [x] + [const(net, f"c{i}", v) for i, v in enumerate(inputs)], [y], options)
    path = tmp_path / "m.tflite"
    path.write_bytes(net.w.build([x], [y]))
    with pytest.raises(CglowError, match=message):
        cglow.compile_model(path)


@pytest.mark.parametrize("int8", KINDS)
@pytest.mark.parametrize("adj_y", [False, True])
def test_batch_matmul_constant_rhs(int8, adj_y, tmp_path):
    net = Net(int8, seed=32)
    x = net.input("a", [2, 3, 6], scale=0.05, zero=4)
    shape = [5, 6] if adj_y else [6, 5]
    values = net.rng.integers(-127, 128, shape) if int8 else net.rng.standard_normal(shape)
    dtype = np.int8 if int8 else np.float32
    quant = dict(scale=0.02, zero_point=-3) if int8 else {}
    w = net.w.tensor("b", shape, dtype, values.astype(dtype), **quant)
    y = net.value("y", [2, 3, 5], scale=0.3, zero=2)
    net.w.op("BATCH_MATMUL", [x, w], [y], {"adj_y": adj_y})
    check(net, [y], tmp_path)


@pytest.mark.parametrize("int8", KINDS)
def test_shapes_the_file_computes(int8, tmp_path):
    """Keras 3's Dense on a 3-D input and Flatten under a free batch, as TensorFlow's converter writes them:
    SHAPE, GATHER, REDUCE_PROD, STRIDED_SLICE and PACK compute each RESHAPE's shape, and the file's shapes hold a
    placeholder where the signature leaves a dimension free ([1, 1] for what is [16, 8])."""
    net = Net(int8, seed=33)
    x = net.input("x", [1, 4, 4, 8], signature=[-1, 4, 4, 8], scale=0.05, zero=3)
    shape = net.w.tensor("shape", [4], np.int32)
    net.w.op("SHAPE", [x], [shape], {"out_type": "INT32"})
    prods = []
    for name, picked in (("rows", [0, 1, 2]), ("cols", [3])):
        part = net.w.tensor(f"{name}_dims", [len(picked)], np.int32)
        net.w.op("GATHER", [shape, const(net, f"{name}_at", picked)], [part], {"axis": 0})
        prods.append(net.w.tensor(name, [], np.int32))
        net.w.op("REDUCE_PROD", [part, const(net, f"{name}_axis", [0])], [prods[-1]], {"keep_dims": False})
    matrix = net.w.tensor("matrix", [2], np.int32)
    net.w.op("PACK", prods, [matrix], {"axis": 0, "values_count": 2})
    r = net.value("r", [1, 1], signature=[-1, -1], scale=0.05, zero=3)
    net.w.op("RESHAPE", [x, matrix], [r])
    w, scales = net.weights("w", [5, 8])
    f = net.value("f", [1, 5], signature=[-1, 5], scale=0.3, zero=-2)
    net.w.op("FULLY_CONNECTED", [r, w, net.bias("b", 5, net.scale(x), scales)], [f])
    batch = net.w.tensor("batch", [], np.int32)
    net.w.op("STRIDED_SLICE", [shape, const(net, "b0", [0]), const(net, "e1", [1]), const(net, "s1", [1])], [batch],
             {"shrink_axis_mask": 1})
    flat = net.w.tensor("flat", [2], np.int32)
    net.w.op("PACK", [batch, const(net, "size", 80)], [flat], {"axis": 0, "values_count": 2})
    y = net.value("y", [1, 80], signature=[-1, 80], scale=0.3, zero=-2)
    net.w.op("RESHAPE", [f, flat], [y])
    check(net, [y], tmp_path)


@pytest.mark.parametrize("int8", KINDS)
def test_tile(int8, tmp_path):
    """Keras 3's UpSampling2D: EXPAND_DIMS, TILE and RESHAPE along each axis."""
    net = Net(int8, seed=34)
    x = net.input("x", [1, 3, 4, 2], **QUANT)
    e = net.value("e", [1, 3, 1, 4, 2], **QUANT)
    net.w.op("EXPAND_DIMS", [x, const(net, "axis", 2)], [e])
    t = net.value("t", [1, 3, 2, 4, 2], **QUANT)
    net.w.op("TILE", [e, const(net, "multiples", [1, 1, 2, 1, 1])], [t])
    r = net.value("r", [1, 6, 4, 2], **QUANT)
    net.w.op("RESHAPE", [t, const(net, "shape", [1, 6, 4, 2])], [r])
    y = net.value("y", [2, 6, 4, 4], **QUANT)
    net.w.op("TILE", [r, const(net, "multiples2", [2, 1, 1, 2])], [y])
    check(net, [y], tmp_path)


def test_reduce_prod(tmp_path):
    net = Net(False, seed=35)
    x = net.input("x", [2, 3, 4])
    y = net.value("y", [2, 1, 4])
    net.w.op("REDUCE_PROD", [x, const(net, "axes", [-2])], [y], {"keep_dims": True})
    z = net.value("z", [4])
    net.w.op("REDUCE_PROD", [x, const(net, "axes2", [0, 1])], [z], {"keep_dims": False})
    check(net, [y, z], tmp_path)


@pytest.mark.parametrize("int8,op,out,options,message", [
    (False, "RESHAPE", [3, 4], None, r"declares its output 'y' float32\[3,4\], the operator computes float32\[2,6\]"),
    (True, "REDUCE_PROD", [2, 1], {"keep_dims": True}, "a product of 8-bit values is not supported")])
def test_refused_shapes_and_types(int8, op, out, options, message, tmp_path):
    """A shape the file declares is the one computed but where its signature leaves a dimension free."""
    net = Net(int8, seed=36)
    x = net.input("x", [2, 6], **QUANT)
    y = net.value("y", out, **QUANT)
    net.w.op(op, [x, const(net, "c", [2, 6] if op == "RESHAPE" else [1])], [y], options)
    path = tmp_path / "m.tflite"
    path.write_bytes(net.w.build([x], [y]))
    with pytest.raises(CglowError, match=message):
        cglow.compile_model(path)
