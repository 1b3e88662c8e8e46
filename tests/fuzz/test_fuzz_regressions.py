"""The graphs the random-graph fuzzer found failing, minimized: each compiled, built and run under the
sanitizers, against onnxruntime. The importer bugs that mutated bytes found are rows of
tests/hostile_models.py."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto as T, helper
import pytest

from cglow.options import Options
from cglow.tools import matrix
from tests.fuzz.differential import check_graph
from tests.hostile_models import const, model, node, tensor
from tests.util import ort_run

WEIGHTS = np.linspace(-1, 1, 16, dtype=np.float32)


def weights(name: str, *shape: int):
    return const(name, WEIGHTS[:int(np.prod(shape))].reshape(shape), np.float32)


def grouped_transpose_with_output_padding():
    """Found as graph 5 of seed 1: the output padding puts the last column's window wholly in the padding."""
    nodes = [node("ConvTranspose", ["x", "w"], ["t"], "up", group=2, output_padding=[0, 1], strides=[1, 2]),
             node("ReduceMax", ["t"], ["y"], "max", axes=[0])]
    return model(nodes, [tensor("x", [2, 2, 2, 2])], [tensor("y", None)], [weights("w", 2, 1, 2, 2)])


def conv_reading_only_padding():
    """Found as graph 242 of seed 2: every window of a strided grouped conv lies in the padding."""
    conv = node("Conv", ["x", "w", "b"], ["y"], "conv", group=2, pads=[1, 0], strides=[2])
    return model([conv], [tensor("x", [1, 2, 1])], [tensor("y", None)], [weights("w", 4, 1, 1), weights("b", 4)])


def conv_on_a_one_wide_slice():
    """Found as graph 657 of seed 5: a conv over a strided view one element wide."""
    nodes = [node("Slice", ["x", "s", "e", "a"], ["t"], "slice"),
             node("Conv", ["t", "w"], ["y"], "conv", auto_pad="SAME_LOWER", kernel_shape=[2])]
    inits = [const("s", [1, -1]), const("e", [4, 2]), const("a", [1, 2]), weights("w", 2, 3, 2)]
    return model(nodes, [tensor("x", [1, 5, 2])], [tensor("y", None)], inits)


def empty_slice_of_a_transpose_flattened():
    """Found as graph 387 of seed 40: reshaping an empty strided view divided by its zero dim
    (cglow/instr/ir.py View.reshape)."""
    nodes = [node("Transpose", ["x"], ["t"], "turn", perm=[2, 0, 1]),
             node("Slice", ["t", "s", "e", "a"], ["u"], "empty"), node("Flatten", ["u"], ["y"], "flat", axis=1)]
    inits = [const("s", [1]), const("e", [1]), const("a", [1])]
    return model(nodes, [tensor("x", [2, 3, 4])], [tensor("y", None)], inits)


def slice_stepping_back_from_before_the_start():
    """Found as graph 206 of seed 70: stepping back, ONNX clamps a start before the first element to the first
    element, where a Python slice keeps nothing (cglow/graph/rules/tensor.py slice_ranges)."""
    slice_ = node("Slice", ["x", "s", "e", "a", "t"], ["y"], "back")
    inits = [const("s", [-6]), const("e", [-10]), const("a", [0]), const("t", [-2])]
    return model([slice_], [tensor("x", [5, 4])], [tensor("y", None)], inits)


def resize_to_nothing():
    """Found as graph 325 of seed 80: a scale of one half over an axis one long makes an empty output, which
    onnxruntime computes and cglow refused (cglow/graph/rules/resize.py, cglow/lower/ops/resize.py)."""
    resize = node("Resize", ["x", "", "s"], ["y"], "half", mode="linear")
    return model([resize], [tensor("x", [1, 2, 1, 3])], [tensor("y", None)], [const("s", [1, 1, 0.5, 1], np.float32)])


def leaky_relu_of_a_resize():
    """Found as graph 470 of seed 90: fusing the Resize's map `0.5f * {0} + 0.5f * {1}` into LeakyRelu's
    `{0} * 0.44f` multiplied the last term only (fusion now substitutes expression trees, cglow/instr/expr.py)."""
    nodes = [node("Resize", ["x", "", "s"], ["t"], "half", mode="linear"),
             node("LeakyRelu", ["t"], ["y"], "leaky", alpha=0.44)]
    return model(nodes, [tensor("x", [1, 1, 2, 6])], [tensor("y", None)], [const("s", [1, 1, 1, 0.5], np.float32)])


def cropping_pad_of_a_constant():
    """Found as graph 795 of seed 101: folding a Pad of a constant with negative pads (a crop), which the ONNX
    reference evaluator refuses (cglow/graph/onnx_import.py folds Pad itself)."""
    nodes = [node("Pad", ["c", "p"], ["t"], "crop"), node("Add", ["x", "t"], ["y"], "add")]
    return model(nodes, [tensor("x", [3])], [tensor("y", None)], [weights("c", 5), const("p", [-1, -1])])


def conv_on_a_repeated_channel():
    """Found as graph 129 of seed 61: a grouped conv over a view whose channels repeat one (stride 0)."""
    nodes = [node("Gather", ["x", "i"], ["t"], "pick", axis=1), node("Conv", ["t", "w"], ["y"], "conv", group=2)]
    return model(nodes, [tensor("x", [1, 1, 7])], [tensor("y", None)], [const("i", [0, 0]), weights("w", 4, 1, 1)])


def conv_on_a_transposed_conv():
    """Found as graph 1226 of seed 90: a grouped padded conv over the transposed output of another conv."""
    nodes = [node("Conv", ["x", "w1"], ["c"], "first", pads=[1, 0]),
             node("Transpose", ["c"], ["t"], "turn", perm=[1, 2, 0]),
             node("Conv", ["t", "w2"], ["y"], "second", group=2, pads=[1, 0])]
    return model(nodes, [tensor("x", [1, 1, 2])], [tensor("y", None)], [weights("w1", 6, 1, 2), weights("w2", 2, 1, 2)])


def slice_of_a_scan_output_of_a_loop_in_c():
    """Found as graph 26 of seed 4: a Loop run as a loop in C (900 iterations, beyond the unroll bound) told the
    passes that it touched its scan output's first element only, so that a Slice of later ones was scheduled
    before the loop had written them: a silent wrong output (cglow/instr/ir.py Repeat.touched)."""
    body = helper.make_graph(
        [node("Identity", ["cond"], ["cond_out"], "keep"), node("Mul", ["c", "h"], ["half"], "half"),
         node("Add", ["half", "a"], ["sum"], "add"), node("Tanh", ["sum"], ["c_out"], "tanh"),
         node("ReduceMean", ["c_out"], ["mean"], "mean", keepdims=0)],
        "body", [tensor("i", [], T.INT64), tensor("cond", [], T.BOOL), tensor("c", [3])],
        [tensor("cond_out", [], T.BOOL), tensor("c_out", [3]), tensor("mean", [])], [const("h", 0.5, np.float32)])
    nodes = [node("Tanh", ["x"], ["t"], "t"), node("Mul", ["t", "k"], ["a"], "scale"),
             node("Asin", ["a"], ["s"], "asin"), node("ReduceMean", ["s"], ["y0"], "m", keepdims=0),
             node("Loop", ["trips", "", "t"], ["last", "all"], "loop", body=body),
             node("Slice", ["all", "b", "e", "ax", "st"], ["y1"], "later")]
    inits = [const("trips", 900), const("b", [187]), const("e", [426]), const("ax", [0]), const("st", [2]),
             const("k", 0.95, np.float32)]
    return model(nodes, [tensor("x", [3])], [tensor("y0", None), tensor("y1", None)], inits)


def lp_pool_past_the_end():
    """Found as graph 5 of seed 3 of the vision generators: ceil_mode's last window reaches past the input, where
    the AveragePool (counting padding) that the sum pool was made of divides by fewer than the kernel's size
    (cglow/graph/decompose.py _lp_pool)."""
    pool = node("LpPool", ["x"], ["y"], "pool", ceil_mode=1, kernel_shape=[3], p=1, strides=[2])
    return model([pool], [tensor("x", [1, 2, 6])], [tensor("y", None)], opset=18)


def affine_grid_of_one_transform():
    """Found as graph 20 of seed 3 of the vision generators: AffineGrid's ONNX function body squeezes every dim of
    1 of theta's rows, the batch's too, and so refused a 2-D batch of one (now cglow/graph/decompose.py
    _affine_grid)."""
    nodes = [node("AffineGrid", ["theta", "size"], ["y"], "grid")]
    return model(nodes, [tensor("theta", [1, 2, 3])], [tensor("y", None)], [const("size", [1, 1, 3, 4])], opset=20)


def dft_along_the_first_axis():
    """Found writing the signal generator: from opset 20 DFT's axis may be 0 (ONNX's range is [-r, -2] and [0, r - 2]),
    which cglow refused (cglow/graph/decompose.py _dft)."""
    dft = node("DFT", ["x", "", "axis"], ["y"], "dft", inverse=1)
    return model([dft], [tensor("x", [4, 3, 2])], [tensor("y", None)], [const("axis", 0)], opset=20)


def lrn_of_a_constant_of_one_channel():
    """Found as graph 7 of seed 13 of the Attention generator (an LRN of the present values, a Concat of
    constants): folding a constant LRN of fewer channels than its size, where the reference evaluator reads past
    the last channel (cglow/graph/onnx_import.py _lrn)."""
    nodes = [node("LRN", ["c"], ["t"], "lrn", size=5, alpha=0.3, beta=0.8, bias=1.5),
             node("Add", ["t", "x"], ["y"], "add")]
    return model(nodes, [tensor("x", [1])], [tensor("y", None)], [weights("c", 3, 1, 2, 2)])


def dft_of_a_reshape_to_a_computed_shape():
    """Found as graph 134 of seed 4: a DFT of a Reshape whose target shape Shape, Slice and Concat make, whose
    shape the inference before import (without data propagation) did not know (cglow/graph/inferred.py)."""
    nodes = [node("Shape", ["x"], ["s"], "shape"), node("Slice", ["s", "zero", "one"], ["head"], "head"),
             node("Concat", ["head", "minus_one"], ["target"], "target", axis=0),
             node("Reshape", ["x", "target"], ["r"], "reshape"), node("Unsqueeze", ["r", "minus_one"], ["u"], "signal"),
             node("DFT", ["u", "", "axis"], ["y"], "dft")]
    inits = [const("zero", [0]), const("one", [1]), const("minus_one", [-1]), const("axis", 1)]
    return model(nodes, [tensor("x", [2, 3, 2])], [tensor("y", None)], inits, opset=20)


def gather_elements_of_a_constant_along_many():
    """Found as graph 131 of seed 739947 (a DeformConv of a constant): folding a constant GatherElements of more
    than 64 elements along its axis, which the reference evaluator refuses (cglow/graph/onnx_import.py _fold)."""
    nodes = [node("GatherElements", ["c", "i"], ["t"], "gather", axis=1), node("Add", ["t", "x"], ["y"], "add")]
    inits = [const("c", np.arange(130).reshape(1, 130), np.float32), const("i", [[129, -1, 0, 64, 65]])]
    return model(nodes, [tensor("x", [1])], [tensor("y", None)], inits)


def gather_elements_of_a_constant_by_a_smaller_index():
    """Found as graph 173 of seed 22: folding a constant GatherElements whose index is smaller than the data
    outside the axis (its output has the index's shape)."""
    nodes = [node("GatherElements", ["c", "i"], ["t"], "gather", axis=3), node("Add", ["t", "x"], ["y"], "add")]
    inits = [const("c", np.arange(96).reshape(4, 1, 3, 8), np.float32),
             const("i", np.array([-7, 5]).reshape(2, 1, 1, 1))]
    return model(nodes, [tensor("x", [1])], [tensor("y", None)], inits)


def grouped_transpose_of_a_constant():
    """Found as graph 173 of seed 22: a grouped ConvTranspose of constants, which onnx's reference evaluator fails to
    fold (a reshape): computed at run time instead."""
    nodes = [node("ConvTranspose", ["c", "w"], ["t"], "up", group=2), node("Add", ["t", "x"], ["y"], "add")]
    inits = [weights("c", 1, 2, 1, 3), weights("w", 2, 3, 1, 1)]
    return model(nodes, [tensor("x", [1])], [tensor("y", None)], inits)


def convolution_of_two_kernel_rows():
    """Found as graph 62 of seed 24: gcc -O3 swapped a 2 x 1 convolution's loop over kernel rows with its loop over
    channels (-floop-interchange), which sums each tile's products in another order: the product of 30 of its
    outputs then differed from -O2's in its last bits (runtime_c/kernel.c)."""
    nodes = [node("Conv", ["x", "w", "b"], ["c"], "conv", kernel_shape=[2, 1], strides=[2, 1]),
             node("ReduceProd", ["c", "axes"], ["y"], "product", keepdims=0)]
    inits = [const("w", np.sin(np.arange(24)).reshape(6, 2, 2, 1), np.float32),
             const("b", np.cos(np.arange(6)), np.float32), const("axes", [1, 3])]
    return model(nodes, [tensor("x", [3, 2, 7, 5])], [tensor("y", None)], inits, opset=18)


def library_function_of_a_clip_bound():
    """Found as graph 66 of seed 6: where HardSigmoid saturates at its bound 1, gcc -O2 computed tanhf(erf(1)) at
    compile time, correctly rounded, and glibc's tanhf at -O0 is an ulp off (0x1.5fdd86p-1 against 0x1.5fdd84p-1);
    the C library's inexact functions now read their argument through cglow_opaque (runtime_c/opaque.c)."""
    nodes = [node("HardSigmoid", ["x"], ["h"], "hard_sigmoid"), node("Erf", ["h"], ["e"], "erf"),
             node("Tanh", ["e"], ["y"], "tanh")]
    return model(nodes, [tensor("x", [64])], [tensor("y", None)])


CASES = [
    gather_elements_of_a_constant_by_a_smaller_index,
    grouped_transpose_of_a_constant,
    slice_of_a_scan_output_of_a_loop_in_c,
    gather_elements_of_a_constant_along_many,
    dft_of_a_reshape_to_a_computed_shape,
    lrn_of_a_constant_of_one_channel,
    dft_along_the_first_axis,
    affine_grid_of_one_transform,
    lp_pool_past_the_end,
    empty_slice_of_a_transpose_flattened,
    slice_stepping_back_from_before_the_start,
    resize_to_nothing,
    leaky_relu_of_a_resize,
    cropping_pad_of_a_constant,
    grouped_transpose_with_output_padding,
    conv_reading_only_padding,
    conv_on_a_one_wide_slice,
    conv_on_a_repeated_channel,
    conv_on_a_transposed_conv,
]


def quantized_depthwise_of_eight_channels():
    """Found as quantized graph 55 of seed 31: an 8-bit depthwise 1x1 convolution of 8 channels on a Cortex-M3, in
    tiles of 2 channels, over another convolution's channels-last output, widened each tile's input span as one
    tile of all 8 does: 6 bytes past its input (AddressSanitizer: global-buffer-overflow; cglow/kernels/conv.py
    _widened_spans)."""
    nodes = [node("QuantizeLinear", ["x", "s", "z"], ["q"], "quantize"),
             node("DequantizeLinear", ["q", "s", "z"], ["d"], "dequantize"),
             node("DequantizeLinear", ["w1", "ws"], ["w1d"], "weights1", axis=0),
             node("Conv", ["d", "w1d"], ["c1"], "pointwise", kernel_shape=[1, 1]),
             node("QuantizeLinear", ["c1", "s", "z"], ["q1"], "requantize1"),
             node("DequantizeLinear", ["q1", "s", "z"], ["d1"], "dequantize1"),
             node("DequantizeLinear", ["w2", "ws"], ["w2d"], "weights2", axis=0),
             node("Conv", ["d1", "w2d"], ["c2"], "depthwise", group=8, kernel_shape=[1, 1]),
             node("QuantizeLinear", ["c2", "s", "z"], ["y"], "requantize2")]
    inits = [const("s", 0.05, np.float32), const("z", 120, np.uint8), const("ws", np.full(8, 0.02), np.float32),
             const("w1", np.arange(32).reshape(8, 4, 1, 1) % 7 - 3, np.int8),
             const("w2", np.arange(-4, 4).reshape(8, 1, 1, 1), np.int8)]
    return model(nodes, [tensor("x", [2, 4, 1, 1])], [tensor("y", None, T.UINT8)], inits, opset=21)


def test_found_quantized_graph_matches_onnxruntime():
    proto = quantized_depthwise_of_eight_channels()
    feeds = {"x": np.random.default_rng(0).uniform(-4, 4, (2, 4, 1, 1)).astype(np.float32)}
    assert check_graph(proto, feeds, ort_run(proto, feeds), steps=(1,), options=Options(target="cortex-m3")) is None


@pytest.mark.parametrize("build", CASES)
def test_found_graph_matches_onnxruntime(build):
    proto = build()
    rng = np.random.default_rng(0)
    feeds = {v.name: rng.standard_normal([d.dim_value for d in v.type.tensor_type.shape.dim]).astype(np.float32)
             for v in proto.graph.input}
    assert check_graph(proto, feeds, ort_run(proto, feeds)) is None


@pytest.mark.parametrize("build, feeds", [
    (library_function_of_a_clip_bound, {"x": np.linspace(-4, 4, 64, dtype=np.float32)}),  # HardSigmoid 1 from 2.5
    (convolution_of_two_kernel_rows, {"x": np.random.default_rng(62).standard_normal((3, 2, 7, 5)).astype(np.float32)}),
], ids=["library_function_of_a_clip_bound", "convolution_of_two_kernel_rows"])
def test_found_graph_gives_the_same_bits_at_every_level(build, feeds):
    """Under gcc -O1 to -Os and clang -O2 and -O3: the bits of gcc -O0's build."""
    proto = build()
    assert check_graph(proto, feeds, ort_run(proto, feeds), matrix.HOST) is None
