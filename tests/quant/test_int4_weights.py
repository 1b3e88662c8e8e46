"""QDQ models whose Conv, MatMul and Gemm weights are 4-bit (a per-channel DequantizeLinear of an int4 or uint4
initializer) and whose activations are int8: they fold into the integer kernels, their weights two per byte in
the C file's constant data, unpacked a chunk at a time (instr/narrow_weights.py) or, with --nibble-weights, by
maps (instr/nibbles.py unpack_nibbles), against onnxruntime, on the host and under QEMU on the Cortex-M4 and
M55."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto as T, helper as h, numpy_helper
from onnx.reference import ReferenceEvaluator
import pytest

import cglow
from cglow.options import Options
from cglow.tools import cross

from tests.qdq import folded_ops
from tests.sanitized import run_sanitized
from tests.util import checked_model, need_target, need_tool

ort = pytest.importorskip("onnxruntime")

Y_SCALE = 0.2
# (weight type, its zero point: None for none; the weights' range)
TYPES = {"int4": (T.INT4, None, (-8, 7)), "uint4_zero8": (T.UINT4, 8, (0, 15)), "uint4_zero3": (T.UINT4, 3, (0, 15)),
         "int8": (T.INT8, None, (-128, 127))}


SHAPES = {  # the weights' shape, the input's, the weights' axis of output channels
    "conv": ((16, 6, 3, 3), [1, 6, 7, 7], 0), "conv_odd": ((7, 9, 3, 3), [1, 9, 6, 6], 0),
    "conv_tall": ((16, 6, 3, 3), [1, 6, 40, 40], 0), "conv_few": ((4, 3, 3, 3), [1, 3, 6, 6], 0),
    "matmul": ((40, 24), [5, 40], 1), "gemm": ((24, 40), [5, 40], 0), "conv_inner": ((12, 16, 3, 3), None, 0),
    # chunks of columns (Tiles.chunk_columns) and an edge one; odd k and n; a panel of widened inputs on the
    # Cortex-M4 (48 rows); a batch of matrices by one
    "matmul_wide": ((40, 72), [5, 40], 1), "matmul_odd": ((33, 37), [6, 33], 1), "matmul_tall": ((64, 24), [48, 64], 1),
    "matmul_batch": ((40, 24), [2, 5, 40], 1), "conv_pointwise": ((32, 16, 1, 1), [1, 16, 8, 8], 0),
    # convolutions in chunks of output channels (instr/narrow_weights.py narrow_convs): three of them, and depthwise
    "conv_wide": ((40, 16, 3, 3), [1, 16, 6, 6], 0), "conv_depthwise": ((32, 1, 3, 3), [1, 32, 8, 8], 0),
    # one output channel, whose view's stride says nothing (the quantized fuzzing found the matrix product's)
    "matmul_column": ((256, 1), [2, 256], 1), "conv_single": ((1, 32, 3, 3), [1, 32, 6, 6], 0)}


def _layer(nodes: list, inits: list, rng, kind: str, weights: str, x: str, i: int) -> str:
    """A quantized layer of `kind` on the quantized value x: dequantized, by DequantizeLinear(weights, a scale per
    output channel), quantized to int8 (at Y_SCALE, zero point -2); its output's name."""
    w_type, w_zero, (lo, hi) = TYPES[weights]
    shape, _, axis = SHAPES[kind]
    channels = shape[axis]
    inits += [h.make_tensor(f"w{i}", w_type, shape, rng.integers(lo, hi + 1, shape).reshape(-1).tolist()),
              numpy_helper.from_array(rng.uniform(0.01, 0.03, channels).astype(np.float32), f"w_scale{i}")]
    if kind != "matmul":
        inits.append(numpy_helper.from_array(rng.uniform(-1, 1, channels).astype(np.float32), f"bias{i}"))
    w_inputs = [f"w{i}", f"w_scale{i}"]
    if w_zero is not None:
        inits.append(h.make_tensor(f"w_zero{i}", w_type, [channels], [w_zero] * channels))
        w_inputs.append(f"w_zero{i}")
    scale, zero = ("x_scale", "x_zero") if i == 0 else ("y_scale", "y_zero")
    xd, wd, y = f"xd{i}", f"wd{i}", f"y{i}"
    pad = (shape[-1] // 2 if kind.startswith("conv") else 0)
    op = {"conv": h.make_node("Conv", [xd, wd, f"bias{i}"], [y], pads=[pad] * 4,
                              group=channels if kind == "conv_depthwise" else 1),
          "matmul": h.make_node("MatMul", [xd, wd], [y]),
          "gemm": h.make_node("Gemm", [xd, wd, f"bias{i}"], [y], transB=1)}[kind.split("_")[0]]
    nodes += [h.make_node("DequantizeLinear", [x, scale, zero], [xd]),
              h.make_node("DequantizeLinear", w_inputs, [wd], axis=axis), op,
              h.make_node("QuantizeLinear", [y, "y_scale", "y_zero"], [f"q{i}"])]
    return f"q{i}"


def _model(kind: str, weights: str, seed: int = 0, layers: int = 1):
    """x (float) -> QuantizeLinear int8 -> `layers` layers (_layer; two convolutions: the second reads the first's
    channels-last output, as a network's inner layers do) -> DequantizeLinear; and an input."""
    rng = np.random.default_rng(seed)
    x_shape = SHAPES[kind][1]
    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "x_scale"),
             numpy_helper.from_array(np.array(3, np.int8), "x_zero"),
             numpy_helper.from_array(np.array(Y_SCALE, np.float32), "y_scale"),
             numpy_helper.from_array(np.array(-2, np.int8), "y_zero")]
    nodes = [h.make_node("QuantizeLinear", ["x", "x_scale", "x_zero"], ["xq"])]
    q = "xq"
    for i in range(layers):
        q = _layer(nodes, inits, rng, kind if i == 0 else "conv_inner", weights, q, i)
    nodes.append(h.make_node("DequantizeLinear", [q, "y_scale", "y_zero"], ["out"]))
    graph = h.make_graph(nodes, "int4_weights", [h.make_tensor_value_info("x", T.FLOAT, x_shape)],
                         [h.make_tensor_value_info("out", T.FLOAT, None)], inits)
    return checked_model(graph, 21), rng.uniform(-4, 4, x_shape).astype(np.float32)


def _want(model, x):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


@pytest.mark.parametrize("weights", ["int4", "uint4_zero8", "uint4_zero3"])
@pytest.mark.parametrize("kind", ["conv", "matmul", "gemm"])
def test_int4_weights_two_per_byte(kind, weights):
    model, x = _model(kind, weights)
    compiled = cglow.compile_model(model, options=Options(float_io=True, nibble_weights=True))
    assert ("IntConv" if kind == "conv" else "IntGemm") in folded_ops(model)
    assert "two per byte" in compiled.c_source
    got = cglow.build(compiled)(x)[0]
    assert np.abs(got - _want(model, x)).max() <= Y_SCALE * 1.001  # within one quantization step


@pytest.mark.parametrize("kind", ["conv", "matmul"])
def test_int4_weights_take_half_the_flash(kind):
    """The same layer with int8 weights (values beyond 4 bits) against int4 ones: the weight bytes about halve."""
    count = 16 * 6 * 9 if kind == "conv" else 40 * 24
    packed = Options(nibble_weights=True)
    sizes = {w: cglow.compile_model(_model(kind, w)[0], options=packed).weights_bytes for w in ("int8", "int4")}
    assert sizes["int8"] - sizes["int4"] >= count // 2 - 16
    assert sizes["int4"] < 0.6 * sizes["int8"]


# (kind, target) whose weights stay a byte each by default: rows of 37 columns, not whole octets
# (instr/narrow_weights.py chunks_of), or 7 output channels innermost (narrow_convs)
ONE_A_BYTE = {("matmul_odd", "generic")} | {("conv_odd", t) for t in ("generic", "x86-avx2", "x86-avx512",
                                                                        "x86-avx512-vnni", "aarch64")}


@pytest.mark.parametrize("target", ["generic", "x86-avx2", "x86-avx512", "x86-avx512-vnni", "cortex-m4", "aarch64"])
@pytest.mark.parametrize("kind", ["matmul", "gemm", "matmul_wide", "matmul_odd", "matmul_tall", "matmul_batch",
                                  "matmul_column", "conv_pointwise", "conv", "conv_odd", "conv_wide",
                                  "conv_depthwise", "conv_single"])
def test_int4_weights_unpack_by_chunks_by_default(kind, target):
    """By default, int4 weights stay two per byte: a matrix product's kernel (a 1x1 convolution's too: instr/passes.py
    pointwise_as_gemm) unpacks a chunk of columns at a time into a scratch buffer, and a convolution runs as
    convolutions of a chunk of output channels each, after maps that unpack theirs there; as every target lays its
    weights out (columns innermost, k innermost, channel pairs, column blocks, int32). The output bit for bit the
    same as with them one a byte (--unpacked-weights), within a step of onnxruntime; flash for half the weights,
    the arena one chunk more."""
    model, x = _model(kind, "int4", seed=3)
    packed = cglow.compile_model(model, options=Options(float_io=True, target=target))
    plain = cglow.compile_model(model, options=Options(float_io=True, target=target, narrow_weights=False))
    got = cglow.build(packed)(x)[0]
    assert np.array_equal(got, cglow.build(plain)(x)[0])
    assert np.abs(got - _want(model, x)).max() <= Y_SCALE * 1.001
    if (kind, target) in ONE_A_BYTE:
        assert packed.weights_bytes == plain.weights_bytes
        return
    weights = np.prod(SHAPES[kind][0])
    channels = SHAPES[kind][0][SHAPES[kind][2]]
    k = weights // channels  # the values an output channel sums over
    # a matrix-vector product's dot products on a Cortex-M4 read each column's nibbles in whole words
    # (instr/narrow_weights.py nibble_dots)
    padding = channels * (-k % 8) // 2
    assert plain.weights_bytes - packed.weights_bytes >= weights // 2 - 16 - padding
    # a chunk of 64 channels at most, int32 where x86 widens weights (instr/vector_dots.py widen_weights)
    assert packed.arena_bytes - plain.arena_bytes <= k * 64 * (4 if target.startswith("x86") else 1) + 64


@pytest.mark.parametrize("kind", ["matmul_wide", "matmul_odd", "matmul_column", "conv_wide", "conv_depthwise",
                                  "conv_single"])
def test_int4_chunks_under_the_sanitizers(kind):
    """The unpacking of chunks (the matrix product's own, runtime_c/nibbles8.c; the convolutions' maps) and the
    kernels reading them: no AddressSanitizer or UndefinedBehaviorSanitizer report, the optimized build's output."""
    model, x = _model(kind, "int4", seed=6)
    compiled = cglow.compile_model(model, options=Options(float_io=True))
    assert np.array_equal(run_sanitized(compiled, [x])[0], cglow.build(compiled)(x)[0])


def test_int8_weights_stay_as_they_are():
    compiled = cglow.compile_model(_model("conv", "int8")[0], options=Options(nibble_weights=True))
    assert "two per byte" not in compiled.c_source


@pytest.mark.parametrize("target_name", ["cortex-m4", "cortex-m55"])
@pytest.mark.parametrize("kind, weights", [("conv", "int4"), ("matmul", "uint4_zero3"), ("gemm", "int4"),
                                           ("matmul_tall", "int4")])
def test_int4_weights_on_cortex_m(target_name, kind, weights):
    """The image under QEMU gives the host build's integers, and those are onnxruntime's within a step."""
    target = need_target(target_name)
    model, x = _model(kind, weights, seed=4)
    compiled = cglow.compile_model(model, options=Options(target=target.tiles, nibble_weights=True))
    xq = np.clip(np.rint(x / 0.05) + 3, -128, 127).astype(np.int8).reshape(compiled.inputs[0].shape)
    run = cross.run_image(cross.build_image(compiled, [xq], target), compiled, target, count=False)
    host = cglow.build(compiled)(xq)[0]
    assert np.array_equal(run.outputs[0], host)
    assert np.abs((host.astype(np.float32) + 2) * Y_SCALE - _want(model, x)).max() <= Y_SCALE * 1.001


def _matrix_vector(m: int, k: int, n: int, activations: int, seed: int = 9):
    """x [m, k] (float) -> QuantizeLinear (`activations`, int8 or uint8, a nonzero zero point) -> MatMul by int4
    weights [k, n] with a scale per column -> QuantizeLinear to the same type -> DequantizeLinear; and an input."""
    rng = np.random.default_rng(seed)
    zero = {T.INT8: -7, T.UINT8: 131}[activations]
    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "x_scale"),
             h.make_tensor("x_zero", activations, [], [zero]),
             numpy_helper.from_array(np.array(Y_SCALE, np.float32), "y_scale"),
             h.make_tensor("y_zero", activations, [], [zero + 3]),
             h.make_tensor("w", T.INT4, [k, n], rng.integers(-8, 8, (k, n)).reshape(-1).tolist()),
             numpy_helper.from_array(rng.uniform(0.01, 0.03, n).astype(np.float32), "w_scale")]
    nodes = [h.make_node("QuantizeLinear", ["x", "x_scale", "x_zero"], ["xq"]),
             h.make_node("DequantizeLinear", ["xq", "x_scale", "x_zero"], ["xd"]),
             h.make_node("DequantizeLinear", ["w", "w_scale"], ["wd"], axis=1),
             h.make_node("MatMul", ["xd", "wd"], ["y"]),
             h.make_node("QuantizeLinear", ["y", "y_scale", "y_zero"], ["yq"]),
             h.make_node("DequantizeLinear", ["yq", "y_scale", "y_zero"], ["out"])]
    graph = h.make_graph(nodes, "matrix_vector", [h.make_tensor_value_info("x", T.FLOAT, [m, k])],
                         [h.make_tensor_value_info("out", T.FLOAT, None)], inits)
    return checked_model(graph, 21), rng.uniform(-4, 4, (m, k)).astype(np.float32)


# (m, k, n): a matrix-vector product; rows with a remainder of k beyond whole octets; fewer values than an octet
MATRIX_VECTOR = [(1, 256, 24), (3, 45, 19), (2, 7, 40)]


@pytest.mark.parametrize("activations", [T.INT8, T.UINT8], ids=["int8", "uint8"])
@pytest.mark.parametrize("m, k, n", MATRIX_VECTOR)
@pytest.mark.parametrize("compiler", ["gcc", "clang"])
def test_int4_matrix_vector_products_unpack_in_registers(compiler, m, k, n, activations):
    """On a Cortex-M4 a product of a few rows by int4 weights reads each column's nibbles a word at a time in its dot
    products (instr/narrow_weights.py nibble_dots; kernels/arm_steps.py nibble_step): no scratch in the arena. The
    image under QEMU (gcc or clang, the hand-scheduled steps) gives the host build's integers (their C), those of
    the weights one a byte, and onnxruntime's within a step."""
    target = need_target("cortex-m4")
    if compiler == "clang":
        need_tool("clang")
        target = need_target("cortex-m4-clang")
    model, x = _matrix_vector(m, k, n, activations)
    compiled = cglow.compile_model(model, options=Options(target="cortex-m4"))
    plain = cglow.compile_model(model, options=Options(target="cortex-m4", narrow_weights=False))
    assert "8 more */" in compiled.c_source and compiled.arena_bytes == plain.arena_bytes
    info = compiled.inputs[0]
    xq = np.clip(np.rint(x / 0.05) + info.zero_point, *{T.INT8: (-128, 127), T.UINT8: (0, 255)}[activations])
    xq = xq.astype(info.dtype)
    host = cglow.build(compiled)(xq)[0]
    assert np.array_equal(host, cglow.build(plain)(xq)[0])
    run = cross.run_image(cross.build_image(compiled, [xq], target), compiled, target, count=False)
    assert np.array_equal(run.outputs[0], host)
    out = compiled.outputs[0]
    assert np.abs((host.astype(np.float32) - out.zero_point) * Y_SCALE - _want(model, x)).max() <= Y_SCALE * 1.001


@pytest.mark.parametrize("m, k, n", MATRIX_VECTOR)
def test_int4_dot_products_in_registers_under_the_sanitizers(m, k, n):
    """The C of those dot products (the host's build of the Cortex-M4's kernel): no AddressSanitizer or
    UndefinedBehaviorSanitizer report, the optimized build's output."""
    model, x = _matrix_vector(m, k, n, T.UINT8)
    compiled = cglow.compile_model(model, options=Options(target="cortex-m4", float_io=True))
    assert "8 more */" in compiled.c_source
    assert np.array_equal(run_sanitized(compiled, [x])[0], cglow.build(compiled)(x)[0])


# the layers whose weights stay int8: uint4 of a zero point other than 8 need a value per output channel, which
# the vector dot products' blocked layouts and a channel of an odd count of weights do not give (instr/nibbles.py)
UNPACKED = {("conv", "x86-avx2", "uint4_zero3"): 1, ("conv", "aarch64", "uint4_zero3"): 1,
            **{("conv_odd", target, "uint4_zero3"): 1 for target in ("generic", "x86-avx2", "cortex-m4", "aarch64")}}


@pytest.mark.parametrize("weights", ["int4", "uint4_zero3"])
@pytest.mark.parametrize("target", ["generic", "x86-avx2", "cortex-m4", "aarch64"])
@pytest.mark.parametrize("kind, layers", [("conv", 2), ("conv_odd", 1), ("matmul", 1), ("gemm", 1)])
def test_int4_weights_in_every_kernel_layout(kind, layers, target, weights):
    """Each target's kernels lay their weights out their own way (channels innermost, output channels innermost or
    outermost, in channel pairs, widened to int32): the nibbles are packed after that, their results the same."""
    model, x = _model(kind, weights, seed=2, layers=layers)
    compiled = cglow.compile_model(model, options=Options(float_io=True, target=target, nibble_weights=True))
    assert compiled.c_source.count("two per byte") == layers - UNPACKED.get((kind, target, weights), 0)
    got = cglow.build(compiled)(x)[0]
    assert np.abs(got - _want(model, x)).max() <= Y_SCALE * 1.001


@pytest.mark.parametrize("narrow", [True, False])
def test_int4_weights_in_a_patched_span(narrow):
    """Two convolutions run row by row (the planner's patches, instr/patches.py): each tile unpacks its chunks of
    weights; with --unpacked-weights and --nibble-weights, maps unpack them before the first tile, once."""
    model, x = _model("conv_tall", "int4", layers=2)
    compiled = cglow.compile_model(model, options=Options(float_io=True, nibble_weights=True, narrow_weights=narrow))
    assert compiled.patches is not None and compiled.c_source.count("two per byte") == 2
    if narrow:
        assert compiled.c_source.count("unpacked weights */") > 4  # two maps a chunk of a tile
    else:
        assert compiled.c_source.count(" unpacked */") == 4  # two maps a layer
    got = cglow.build(compiled)(x)[0]
    assert np.abs(got - _want(model, x)).max() <= Y_SCALE * 1.001


def test_a_few_int4_weights_stay_int8():
    """A layer of fewer weights than the unpacking maps' code would take in flash (nibbles.MIN_WEIGHTS)."""
    model, x = _model("conv_few", "int4")
    compiled = cglow.compile_model(model, options=Options(float_io=True, nibble_weights=True))
    assert "two per byte" not in compiled.c_source
    assert np.abs(cglow.build(compiled)(x)[0] - _want(model, x)).max() <= Y_SCALE * 1.001


# weight-only quantized products: (op, weight type, zero point, per column, transB); the weights' range
WEIGHT_ONLY = {"int4": ("MatMul", T.INT4, None, True, 0), "uint4_zero8": ("MatMul", T.UINT4, 8, True, 0),
               "uint4_zero3": ("MatMul", T.UINT4, 3, True, 0), "int8_per_tensor": ("MatMul", T.INT8, None, False, 0),
               "gemm_int4": ("Gemm", T.INT4, None, True, 1), "uint8_zero0": ("MatMul", T.UINT8, 0, True, 0)}
RANGES = {T.INT4: (-8, 7), T.UINT4: (0, 15), T.INT8: (-128, 127), T.UINT8: (0, 255)}


def _weight_only(case: str, k: int = 64, n: int = 32, m: int = 3):
    """A float MatMul (or Gemm: transposed weights, alpha, beta and a bias) by integer weights dequantized per column
    or per tensor, no quantized activations; and an input."""
    op, w_type, zero, per_column, trans_b = WEIGHT_ONLY[case]
    rng = np.random.default_rng(5)
    lo, hi = RANGES[w_type]
    shape, scales = ([n, k] if trans_b else [k, n]), (n if per_column else 1)
    inits = [h.make_tensor("w", w_type, shape, rng.integers(lo, hi + 1, k * n).tolist()),
             numpy_helper.from_array(rng.uniform(0.01, 0.1, scales).astype(np.float32).reshape(
                 (n,) if per_column else ()), "scale")]
    dequantize = ["w", "scale"]
    if zero is not None:
        inits.append(h.make_tensor("zero", w_type, [n] if per_column else [], [zero] * scales))
        dequantize.append("zero")
    return _by_dequantized(h.make_node("DequantizeLinear", dequantize, ["wf"], axis=1 - trans_b), op, inits, rng,
                           m, k, n)


def _by_dequantized(dequantize, op: str, inits: list, rng, m: int, k: int, n: int):
    """The model of x [m, k] by the dequantized weights `dequantize` writes (wf): a MatMul, or a Gemm of transposed
    weights, alpha, beta and a bias; and an input."""
    nodes = [dequantize]
    if op == "Gemm":
        inits.append(numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), "bias"))
        nodes.append(h.make_node("Gemm", ["x", "wf", "bias"], ["y"], transB=1, alpha=0.7, beta=1.3))
    else:
        nodes.append(h.make_node("MatMul", ["x", "wf"], ["y"]))
    graph = h.make_graph(nodes, "weight_only", [h.make_tensor_value_info("x", T.FLOAT, [m, k])],
                         [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
    return checked_model(graph, 21), rng.standard_normal((m, k)).astype(np.float32)


@pytest.mark.parametrize("target", ["generic", "x86-avx512-vnni", "cortex-m4", "aarch64"])
@pytest.mark.parametrize("case", sorted(WEIGHT_ONLY))
def test_weight_only_quantized_products_keep_integer_weights(case, target):
    """A float product by integer weights (graph/quant/weight_only.py): the weights stay integers in flash, one byte
    each, two per byte where they fit 4 bits (unpacked by the kernel), each column's scale applied to its float sum;
    within float32 rounding of onnx's reference evaluator (onnxruntime dequantizes such int4 weights otherwise:
    tests/tools/test_cross_types.py). uint8 weights of zero point 0 (values beyond int8) become float32."""
    model, x = _weight_only(case)
    compiled = cglow.compile_model(model, options=Options(target=target))
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    assert np.abs(cglow.build(compiled)(x)[0] - want).max() <= 1e-5 * np.abs(want).max()
    weights = 64 * 32
    if case == "uint8_zero0":
        assert compiled.weights_bytes >= 4 * weights
    elif case in ("int4", "uint4_zero8", "gemm_int4"):
        assert "cglow_nibbles8(" in compiled.c_source and compiled.weights_bytes <= weights // 2 + 512
    else:
        assert "cglow_nibbles8(" not in compiled.c_source and weights <= compiled.weights_bytes <= weights + 512


def test_weight_only_int4_on_cortex_m4():
    """The Cortex-M4 image under QEMU gives the host build's floats (the same C), within float32 rounding."""
    target = need_target("cortex-m4")
    model, x = _weight_only("gemm_int4")
    compiled = cglow.compile_model(model, options=Options(target=target.tiles))
    run = cross.run_image(cross.build_image(compiled, [x], target), compiled, target, count=False)
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    assert np.abs(run.outputs[0] - cglow.build(compiled)(x)[0]).max() <= 1e-6 * np.abs(want).max()
    assert np.abs(run.outputs[0] - want).max() <= 1e-5 * np.abs(want).max()


def test_weight_only_int4_under_the_sanitizers():
    model, x = _weight_only("gemm_int4")
    compiled = cglow.compile_model(model)
    assert np.array_equal(run_sanitized(compiled, [x])[0], cglow.build(compiled)(x)[0])


# blocked weight-only products: (op, weight type, zero points, k, block size)
BLOCKED = {"int4": ("MatMul", T.INT4, False, 256, 32), "int4_ragged": ("MatMul", T.INT4, False, 100, 32),
           "uint4_zeros": ("MatMul", T.UINT4, True, 128, 64), "gemm_int4": ("Gemm", T.INT4, False, 128, 32),
           "many_blocks": ("MatMul", T.INT4, False, 4096, 32)}


def _blocked(case: str, n: int = 24, m: int = 2):
    """A float product by integer weights dequantized in blocks of k (block_size; a scale, and a zero point, per
    block and column); and an input."""
    op, w_type, zeros, k, size = BLOCKED[case]
    rng = np.random.default_rng(9)
    lo, hi = RANGES[w_type]
    trans_b = int(op == "Gemm")
    blocks = -(-k // size)
    shape, scales = ([n, k], [n, blocks]) if trans_b else ([k, n], [blocks, n])
    inits = [h.make_tensor("w", w_type, shape, rng.integers(lo, hi + 1, k * n).tolist()),
             numpy_helper.from_array(rng.uniform(0.01, 0.1, scales).astype(np.float32), "scale")]
    if zeros:
        inits.append(h.make_tensor("zero", w_type, scales, rng.integers(lo, hi + 1, blocks * n).tolist()))
    dequantize = h.make_node("DequantizeLinear", ["w", "scale"] + ["zero"] * zeros, ["wf"], axis=trans_b,
                             block_size=size)
    return _by_dequantized(dequantize, op, inits, rng, m, k, n)


@pytest.mark.parametrize("target", ["generic", "x86-avx512-vnni", "cortex-m4", "aarch64"])
@pytest.mark.parametrize("case", sorted(BLOCKED))
def test_blocked_weight_only_products_sum_a_product_per_block(case, target):
    """Weights dequantized in blocks of k (graph/quant/weight_only.py _scaled): a chain of ScaledGemms, one per block
    (128 of them for k = 4096), each adding the sum of those before; within float32 rounding of onnx's reference
    evaluator; the arena holds two partial sums and a chunk of unpacked weights at most, not the dequantized float
    weights (k * 24 * 4 bytes)."""
    model, x = _blocked(case)
    compiled = cglow.compile_model(model, options=Options(target=target))
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    assert np.abs(cglow.build(compiled)(x)[0] - want).max() <= 1e-5 * np.abs(want).max()
    _, _, _, k, size = BLOCKED[case]
    assert sum(node.op == "ScaledGemm" for node in compiled.graph.nodes) == -(-k // size)
    assert compiled.arena_bytes <= 2 * 2 * 24 * 4 + size * 24 * 4  # two sums, a block's weights widened to int32
