"""The hot kernels' register tiles vectorize under gcc and clang: a few one-kernel models compiled for
--target x86-avx2 (two for x86-avx512's tiles) with explicit -mavx2 -mfma -mavxvnni (any x86-64 CI machine compiles
that; the test runs nothing). The 8-bit dot products must be VNNI instructions; for --target aarch64, Arm's sdot
under aarch64-linux-gnu-gcc -march=armv8.2-a+dotprod.

gcc vectorizes a tile's innermost loop itself (runtime_c/tile_loop.c keeps it from unrolling it first): its report
(-fopt-info-vec-optimized) must name the line of each loop that multiplies and adds into the accumulators. clang
unrolls that loop completely and then vectorizes the straight-line tile (its SLP remarks name the stores, not the
loop): the kernel's assembly must have packed multiply-adds, and at most one scalar one for 8 of them (a depthwise
tile at the image's edge keeps a few: 8 of 108 here; a tile that does not vectorize has one per accumulator). Each
case is a way it went wrong (x86-64 AVX-512, clang 14 -O3): a kernel whose restrict clang had dropped with the
arena's addresses (runtime_c/kernel.c; the int8 matrix product here, resnet8's residual convolutions); a matrix
product of two tiles per row, whose stores clang did not see as runs (kernels/gemm.py out); a ReLU6 epilogue, which
clang turned into branches (runtime_c/clip.c). The whole model is compiled, so that clang sees the kernel's call as
it does in net_run.
"""
from __future__ import annotations

import re
import subprocess

import numpy as np
import onnx
from onnx import TensorProto, helper
import pytest

import cglow
from cglow.options import Options
from cglow.tools.host import STRICT_FLAGS
from tests.kernels.test_quant_kernels_conv import conv_case
from tests.kernels.test_quant_kernels_gemm import gemm_case
from tests.qdq import UINT8
from tests.util import checked_model, need_tool

FLAGS = ("-std=c99", "-O3", "-mavx2", "-mfma", "-mavxvnni", "-S")
GCC_REPORT = ("-fopt-info-vec-optimized",)


def _conv(c: int, m: int, h: int, w: int, kernel: int, group: int = 1, residual: bool = False,
          relu: float | None = 0.0) -> onnx.ModelProto:
    """x, channels last as a TensorFlow export has it -> Conv (bias, pads keeping the size) [-> + x] -> Relu (a Clip
    to [0, relu] where relu > 0, none where None) -> channels last again, seeded weights: the channels-last kernel
    of the zoo's convolutions (conv_nhwc.c.j2)."""
    rng = np.random.default_rng(0)
    weights = [helper.make_tensor("w", TensorProto.FLOAT, (m, c // group, kernel, kernel),
                                  rng.standard_normal((m, c // group, kernel, kernel)).astype(np.float32).ravel()),
               helper.make_tensor("b", TensorProto.FLOAT, (m,), rng.standard_normal(m).astype(np.float32))]
    pad = kernel // 2
    nodes = [helper.make_node("Transpose", ["input"], ["x"], perm=[0, 3, 1, 2]),
             helper.make_node("Conv", ["x", "w", "b"], ["conv"], group=group, pads=[pad] * 4)]
    last = "conv"
    if residual:
        nodes.append(helper.make_node("Add", ["conv", "x"], ["sum"]))
        last = "sum"
    if relu is not None:
        bounds = [helper.make_tensor(n, TensorProto.FLOAT, (), [v]) for n, v in (("lo", 0.0), ("hi", relu))]
        weights += bounds if relu else []
        nodes.append(helper.make_node("Clip", [last, "lo", "hi"], ["relu"]) if relu else
                     helper.make_node("Relu", [last], ["relu"]))
        last = "relu"
    nodes.append(helper.make_node("Transpose", [last], ["y"], perm=[0, 2, 3, 1]))
    graph = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("input", TensorProto.FLOAT, (1, h, w, c))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=weights)
    return checked_model(graph)


# name -> (model, --target, whether its multiply-adds are float, whether it sums 8-bit dot products); each has one
# convolution or matrix product. The pointwise one (a matrix product) takes the 8 x 32 tiles of AVX-512, two per row,
# and no activation (MobileNetV2's projections): clang left it scalar before kernels/gemm.py's `out`, which the AVX2
# tiles did not show. The int8 ones with runs of 32 values or more sum them as dot products of unsigned inputs
# (Tiles.vector_dot, kernels/dot.j2 reduce): gcc's VNNI vpdpbusd, clang 14's vpdpwssd; a shorter one as int32
# multiply-adds over output channels.
CASES = {
    "conv 3x3": (lambda: _conv(16, 32, 6, 20, 3), "x86-avx2", True, False),
    "conv 3x3 residual": (lambda: _conv(16, 16, 6, 20, 3, residual=True), "x86-avx2", True, False),
    "depthwise 3x3": (lambda: _conv(32, 32, 6, 20, 3, group=32), "x86-avx2", True, False),
    "depthwise 3x3 relu6": (lambda: _conv(32, 32, 6, 20, 3, group=32, relu=6.0), "x86-avx2", True, False),
    "pointwise": (lambda: _conv(64, 64, 6, 10, 1, relu=None), "x86-avx512", True, False),
    "int8 gemm": (lambda: gemm_case(np.random.default_rng(0), m=12, k=64, n=64)[0], "x86-avx2", False, True),
    "int8 gemm, short k": (lambda: gemm_case(np.random.default_rng(0), m=12, k=16, n=64)[0], "x86-avx2", False,
                           False),
    "int8 conv 3x3": (lambda: conv_case(np.random.default_rng(0), x_shape=(1, 16, 6, 20), m=32, kernel=(3, 3),
                                        pads=[1, 1, 1, 1], x_zero=-128, channels_last=True)[0], "x86-avx512", False,
                      True),
}


def _kernel(case: str, tmp_path):
    build, target, *_ = CASES[case]
    return _emitted(build(), target, tmp_path)


def _emitted(model: onnx.ModelProto, target: str, tmp_path):
    """The model's C for `target` in tmp_path (net.c, net.h), its lines, and its one convolution or matrix
    product kernel's name."""
    compiled = cglow.compile_model(model, name="net", options=Options(target=target))
    (tmp_path / "net.h").write_text(compiled.h_source)
    source = tmp_path / "net.c"
    source.write_text(compiled.c_source)
    hot = re.findall(r"CGLOW_KERNEL void (net_\d+_(?:conv|gemm))\(", compiled.c_source)
    assert len(hot) == 1, hot
    return source, compiled.c_source.splitlines(), hot[0]


def _mac_loops(lines: list[str], fn: str) -> set[int]:
    """The line numbers of the loops in fn whose body multiplies and adds into an accumulator."""
    start = next(i for i, line in enumerate(lines) if re.search(rf"\b{fn}\(", line) and "CGLOW_KERNEL" in line)
    end = next(i for i in range(start, len(lines)) if lines[i] == "}")
    # a depthwise tile loads its value first; a dot product (kernels/dot.j2 reduce) reads its inputs first
    mac = re.compile(r"\s*(acc\[\d+\]\[\w\] (\+= .* \*|= cglow_fma\()|const int32_t x\d+ = )")
    return {i for i in range(start, end) if lines[i].lstrip().startswith("for (") and
            any(mac.match(line) for line in lines[i + 1:i + 3])}


@pytest.mark.parametrize("case", list(CASES))
def test_gcc_vectorizes_the_tile_loops(case, tmp_path):
    source, lines, fn = _kernel(case, tmp_path)
    run = subprocess.run([need_tool("gcc"), *FLAGS, *GCC_REPORT, str(source), "-o", str(tmp_path / "net.s")],
                         capture_output=True, text=True, check=True)
    vectorized = {int(m) for m in re.findall(r"net\.c:(\d+):\d+: optimized: loop vectorized", run.stderr)}
    loops = _mac_loops(lines, fn)
    assert loops, f"{fn} has no multiply-accumulate loop"
    assert {i + 1 for i in loops} <= vectorized, f"{fn}: lines {sorted(i + 1 for i in loops)} not all vectorized"
    if CASES[case][3]:
        assert "vpdpbusd" in _function_asm_gcc((tmp_path / "net.s").read_text(), fn), f"{fn}: no vpdpbusd"


def _function_asm_gcc(asm: str, fn: str) -> str:
    """fn's assembly as gcc writes it."""
    return asm.split(f"\n{fn}:", 1)[1].split("\t.size\t", 1)[0]


def _function_asm(asm: str, fn: str) -> str:
    """fn's assembly, or net_run's where clang inlined fn there."""
    name = fn if f"\n{fn}:" in asm else "net_run"
    return asm.split(f"\n{name}:", 1)[1].split(".Lfunc_end", 1)[0]


@pytest.mark.parametrize("case", list(CASES))
def test_clang_vectorizes_the_tiles(case, tmp_path):
    source, _, fn = _kernel(case, tmp_path)
    out = tmp_path / "net.s"
    subprocess.run([need_tool("clang"), *FLAGS, str(source), "-o", str(out)], capture_output=True, text=True,
                   check=True)
    body = _function_asm(out.read_text(), fn)
    if CASES[case][2]:
        packed, scalar = len(re.findall(r"vfmadd\d+ps", body)), len(re.findall(r"vfmadd\d+ss", body))
        assert packed and packed >= 8 * scalar, f"{fn}: {scalar} scalar multiply-adds, {packed} packed"
    elif CASES[case][3]:
        assert re.search(r"vpdpwssd|vpdpbusd", body), f"{fn}: no vector dot products"
    else:
        # a scalar tile multiplies in 32 bits (imull); a requantization left scalar, in 64 (imulq)
        assert re.search(r"vpmulld|vpmaddwd", body) and not re.search(r"\timull", body), f"{fn}: scalar tile"


# --target aarch64 sums them as dot products of signed inputs (Tiles.signed_dots, kernels/gemm.py vector_reads), an
# uint8 input read as int8 with its top bit flipped: gcc 12 makes Arm's sdot of both (clang 14 makes none: 16-bit
# smlal). The same runs and zero points as the x86 cases, the convolution's zero point 0 (int8's plain one on Arm),
# and uint8 ones, a padded convolution's 128 (plain) and a matrix product's 130 (folded into the bias).
SDOT_CASES = {
    "int8 gemm": lambda: gemm_case(np.random.default_rng(0), m=12, k=64, n=64)[0],
    "uint8 gemm": lambda: gemm_case(np.random.default_rng(0), m=12, k=64, n=64, a_dtype=UINT8, a_zero=130)[0],
    "int8 conv 3x3": lambda: conv_case(np.random.default_rng(0), x_shape=(1, 16, 6, 20), m=32, kernel=(3, 3),
                                       pads=[1, 1, 1, 1], x_zero=0, channels_last=True)[0],
    "uint8 conv 3x3": lambda: conv_case(np.random.default_rng(0), x_shape=(1, 16, 6, 20), m=32, kernel=(3, 3),
                                        pads=[1, 1, 1, 1], x_dtype=UINT8, x_zero=128, channels_last=True)[0],
}


@pytest.mark.parametrize("case", list(SDOT_CASES))
def test_gcc_makes_sdot_of_the_aarch64_dot_products(case, tmp_path):
    source, _, fn = _emitted(SDOT_CASES[case](), "aarch64", tmp_path)
    out = tmp_path / "net.s"
    subprocess.run([need_tool("aarch64-linux-gnu-gcc"), *STRICT_FLAGS, "-O3", "-march=armv8.2-a+dotprod", "-S",
                    str(source), "-o", str(out)], capture_output=True, text=True, check=True)
    assert "\tsdot\t" in _function_asm_gcc(out.read_text(), fn), f"{fn}: no sdot"


# Built for AVX-512 VNNI (runtime_c/vnni.c), the 8-bit kernels take its intrinsics: a matrix product of x86-avx512-vnni
# (outer products of weights in column blocks, kernels/dot.j2 block_dot) and x86-avx512's gathered convolution
# (dot products whose vectors are summed together, vnni_reduce) must be 512-bit vpdpbusd under both compilers.
VNNI_FLAGS = ("-std=c99", "-O3", "-mavx512f", "-mavx512bw", "-mavx512vnni", "-S")
VNNI_CASES = {
    "int8 gemm, column blocks": (lambda: gemm_case(np.random.default_rng(0), m=12, k=64, n=64)[0], "x86-avx512-vnni"),
    "int8 conv 3x3": (CASES["int8 conv 3x3"][0], "x86-avx512"),
}


@pytest.mark.parametrize("cc", ["gcc", "clang"])
@pytest.mark.parametrize("case", list(VNNI_CASES))
def test_vnni_builds_take_the_intrinsics(case, cc, tmp_path):
    build, target = VNNI_CASES[case]
    source, _, fn = _emitted(build(), target, tmp_path)
    out = tmp_path / "net.s"
    subprocess.run([need_tool(cc), *STRICT_FLAGS, *VNNI_FLAGS, str(source), "-o", str(out)], capture_output=True,
                   text=True, check=True)
    body = (_function_asm_gcc if cc == "gcc" else _function_asm)(out.read_text(), fn)
    assert re.search(r"vpdpbusd\s.*%zmm", body), f"{fn}: no 512-bit vpdpbusd"
