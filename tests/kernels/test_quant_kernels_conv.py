"""The integer convolution kernels (IntConv: direct, depthwise, pointwise run as a GEMM), each from a
small QDQ graph built by hand; the generated kernels are integer-only and build warning-free.

Bit-exact against the NumPy integer reference of tests/qdq.py, whose docstring gives the semantics; each
kernel also runs on seeded random shapes and parameters, each compiled graph on a few inputs, one of them
the extremes of the input type (saturation). Compiled libraries are cached by hash.
"""
from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest

import cglow
from cglow.tools.host import HOST_FLAGS, STRICT_FLAGS
from cglow.options import Options
from tests.qdq import BUILDS, CHAIN, INT8, UINT8, QGraph, conv_chain, conv_layer, folded_ops, input_sets, rand_q


# --- convolution ------------------------------------------------------------------------------------


def conv_case(rng, *, x_shape, x_dtype=INT8, x_zero=0, channels_last=False, **kwargs):
    """A QDQ Conv graph with seeded weights and scales, and its integer reference (a function of x). With
    `channels_last`, x and the output are NHWC (transposed around the Conv, as a TensorFlow export has them), so
    that the convolution runs channels last (kernels/conv.py _conv_nhwc)."""
    g = QGraph()
    x_scale = np.float32(rng.uniform(0.005, 0.05))
    x = g.input("x", x_dtype, (x_shape[0], *x_shape[2:], x_shape[1]) if channels_last else x_shape)
    if channels_last:
        x = g.node("Transpose", [x], perm=[0, 3, 1, 2])
    y, *_, reference = conv_layer(g, rng, x, x_shape, x_scale=x_scale, x_zero=x_zero, x_dtype=x_dtype, **kwargs)
    if not channels_last:
        return g.model([y]), reference
    return g.model([g.node("Transpose", [y], perm=[0, 2, 3, 1])]), \
        lambda xq: reference(xq.transpose(0, 3, 1, 2)).transpose(0, 2, 3, 1)


def check_conv(seed=0, expect="IntConv", target="generic", cflags=HOST_FLAGS, **kwargs) -> str:
    """The case's integers against the reference on a few inputs, compiled for `target`'s tiles and built with
    `cflags`; its C."""
    rng = np.random.default_rng(seed)
    model, reference = conv_case(rng, **kwargs)
    assert expect in folded_ops(model) and "Conv" not in folded_ops(model), folded_ops(model)
    x_shape = kwargs["x_shape"]
    if kwargs.get("channels_last"):
        x_shape = (x_shape[0], *x_shape[2:], x_shape[1])
    compiled = cglow.compile_model(model, name="net", options=Options(target=target))
    net = cglow.build(compiled, cflags=cflags)
    for (x,) in input_sets(rng, [(x_shape, kwargs.get("x_dtype", INT8))]):
        (got,) = net(x)
        want = reference(x)
        assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.shape)
        assert np.array_equal(got, want), f"{np.sum(got != want)} of {got.size} differ; max " \
                                          f"{np.abs(got.astype(int) - want).max()} steps"
    return compiled.c_source


CONV_CASES = {
    "padded, input zero point": dict(x_shape=(1, 3, 7, 6), m=5, kernel=(3, 3), pads=[1, 1, 1, 1], x_zero=7),
    "asymmetric padding": dict(x_shape=(1, 2, 6, 7), m=4, kernel=(3, 2), pads=[2, 0, 1, 1], x_zero=-11),
    "unpadded, input zero point": dict(x_shape=(1, 3, 6, 6), m=4, kernel=(3, 3), x_zero=-9),
    "stride 2": dict(x_shape=(1, 3, 9, 8), m=6, kernel=(3, 3), pads=[1, 1, 1, 1], strides=[2, 2], x_zero=3),
    "dilation": dict(x_shape=(1, 2, 9, 9), m=3, kernel=(3, 3), pads=[2, 2, 2, 2], dilations=[2, 2], x_zero=5),
    "depthwise": dict(x_shape=(1, 6, 7, 7), m=6, kernel=(3, 3), group=6, pads=[1, 1, 1, 1], x_zero=-4),
    "depthwise, multiplier 2, stride 2": dict(x_shape=(1, 3, 8, 8), m=6, kernel=(3, 3), group=3,
                                              pads=[1, 1, 1, 1], strides=[2, 2], x_zero=2),
    "grouped": dict(x_shape=(1, 4, 6, 6), m=6, kernel=(3, 3), group=2, pads=[1, 1, 1, 1], x_zero=1),
    "1x1": dict(x_shape=(1, 8, 5, 5), m=7, kernel=(1, 1), x_zero=-3),
    "1x1, stride 2": dict(x_shape=(1, 4, 6, 6), m=3, kernel=(1, 1), strides=[2, 2], x_zero=12),
    "1-D": dict(x_shape=(1, 4, 17), m=5, kernel=(3,), pads=[1, 1], x_zero=6),
    "1-D, stride 2, unpadded": dict(x_shape=(1, 3, 16), m=2, kernel=(5,), strides=[2], x_zero=-6),
    "per-tensor weight scale": dict(x_shape=(1, 3, 6, 6), m=4, kernel=(3, 3), pads=[1, 1, 1, 1],
                                    per_channel=False, x_zero=4),
    "weights with zero points": dict(x_shape=(1, 3, 6, 6), m=4, kernel=(3, 3), pads=[1, 1, 1, 1], x_zero=-2,
                                     w_zero=[5, -7, 0, 100]),
    "weights with one zero point": dict(x_shape=(1, 2, 5, 5), m=3, kernel=(3, 3), per_channel=False,
                                        w_zero=-30, x_zero=8),
    "uint8 activations": dict(x_shape=(1, 3, 6, 6), m=4, kernel=(3, 3), pads=[1, 1, 1, 1], x_dtype=UINT8,
                              x_zero=128),
    "uint8 activations, unpadded": dict(x_shape=(1, 3, 6, 6), m=4, kernel=(3, 3), x_dtype=UINT8, x_zero=131),
    "uint8 weights": dict(x_shape=(1, 3, 5, 5), m=4, kernel=(3, 3), pads=[1, 1, 1, 1], x_dtype=UINT8,
                          w_dtype=UINT8, x_zero=120, w_zero=[128, 120, 135, 0]),
    "fused Relu": dict(x_shape=(1, 3, 6, 6), m=4, kernel=(3, 3), pads=[1, 1, 1, 1], x_zero=3, act="relu"),
    "fused Relu, uint8": dict(x_shape=(1, 3, 6, 6), m=4, kernel=(3, 3), pads=[1, 1, 1, 1], x_dtype=UINT8,
                              x_zero=100, act="relu", y_zero=0),
    "fused Clip (Relu6)": dict(x_shape=(1, 3, 6, 6), m=4, kernel=(3, 3), pads=[1, 1, 1, 1], x_zero=-5,
                               act=(0.0, 6.0)),
    "fused Clip, narrow": dict(x_shape=(1, 3, 6, 6), m=4, kernel=(3, 3), x_zero=-5, act=(-1.0, 1.5)),
    "one output channel": dict(x_shape=(1, 3, 6, 6), m=1, kernel=(3, 3), pads=[1, 1, 1, 1], x_zero=9),
    "one output channel, per-tensor": dict(x_shape=(1, 5, 4, 4), m=1, kernel=(2, 2), per_channel=False),
    "int32 bias (dequantized)": dict(x_shape=(1, 3, 6, 6), m=4, kernel=(3, 3), pads=[1, 1, 1, 1], bias="int32",
                                     x_zero=-6),
    "int32 bias, per-tensor": dict(x_shape=(1, 3, 6, 6), m=4, kernel=(3, 3), bias="int32", per_channel=False),
    "no bias, batch 2": dict(x_shape=(2, 3, 5, 5), m=4, kernel=(3, 3), pads=[1, 1, 1, 1], bias=False,
                             x_zero=-1),
    "many channels": dict(x_shape=(1, 19, 5, 4), m=13, kernel=(3, 3), pads=[1, 0, 1, 2], x_zero=17),
    "auto_pad SAME_UPPER, stride 2": dict(x_shape=(1, 3, 7, 6), m=4, kernel=(3, 3), strides=[2, 2],
                                          auto_pad="SAME_UPPER", x_zero=7),
    "auto_pad SAME_LOWER, even kernel": dict(x_shape=(1, 3, 6, 6), m=4, kernel=(2, 2), auto_pad="SAME_LOWER",
                                             x_zero=-7),
    "int8 in, uint8 out": dict(x_shape=(1, 3, 5, 5), m=4, kernel=(3, 3), pads=[1, 1, 1, 1], x_zero=5,
                               y_dtype=UINT8),
    "uint8 in, int8 out, fused Relu": dict(x_shape=(1, 3, 5, 5), m=4, kernel=(3, 3), pads=[1, 1, 1, 1],
                                           x_dtype=UINT8, x_zero=140, y_dtype=INT8, act="relu"),
}


@pytest.mark.parametrize("case", list(CONV_CASES))
def test_conv(case):
    check_conv(**CONV_CASES[case])


# x86-64's tiles sum runs of 32 values or more as dot products of unsigned inputs (Tiles.vector_dot), channels last,
# a window's values gathered first (instr/vector_dots.py gather_windows): case -> (the case, whether it does). An
# input zero point of -128 (int8; 0 for uint8) needs no correction; another one is folded into the bias, and gathered
# into a padded window's padding from 8 input channels (Conv.x_pad); with fewer, a padded convolution keeps the tiles
# over output channels.
VECTOR_DOT_CASES = {
    "padded, zero point -128": (dict(x_shape=(1, 16, 6, 9), m=20, kernel=(3, 3), pads=[1, 1, 1, 1], x_zero=-128),
                                True),
    "unpadded, zero point folded": (dict(x_shape=(1, 16, 6, 7), m=20, kernel=(3, 3), x_zero=9), True),
    "unpadded, no bias, stride 2, batch 2": (dict(x_shape=(2, 12, 7, 9), m=17, kernel=(3, 3), strides=[2, 2],
                                                  bias=False, x_zero=-5, act="relu"), True),
    "uint8, unpadded, zero point folded": (dict(x_shape=(1, 12, 5, 6), m=9, kernel=(3, 3), x_dtype=UINT8,
                                                x_zero=131), True),
    "uint8, padded, zero point 0": (dict(x_shape=(1, 12, 5, 6), m=9, kernel=(3, 3), pads=[1, 1, 1, 1],
                                         x_dtype=UINT8, x_zero=0, y_dtype=INT8), True),
    "1x1 (a matrix product), zero point folded": (dict(x_shape=(1, 40, 5, 5), m=24, kernel=(1, 1), x_zero=-3),
                                                  True),
    "1x1, stride 2": (dict(x_shape=(1, 36, 6, 6), m=8, kernel=(1, 1), strides=[2, 2], x_zero=12), True),
    "in place, zero point -128": (dict(x_shape=(1, 16, 6, 9), m=16, kernel=(3, 3), pads=[1, 1, 1, 1], x_zero=-128,
                                       act="relu"), True),
    "dilation 2, 8 channels": (dict(x_shape=(1, 8, 9, 9), m=6, kernel=(3, 3), pads=[2, 2, 2, 2], dilations=[2, 2],
                                    x_zero=-128), True),
    "padded, another zero point (gathered as such)": (dict(x_shape=(1, 16, 6, 9), m=20, kernel=(3, 3),
                                                           pads=[1, 1, 1, 1], x_zero=7), True),
    "padded, another zero point, 4 channels": (dict(x_shape=(1, 4, 6, 9), m=20, kernel=(3, 3), pads=[1, 1, 1, 1],
                                                    x_zero=7), False),
    "short runs": (dict(x_shape=(1, 3, 6, 6), m=8, kernel=(3, 3), x_zero=-128), False),
    "weights with zero points": (dict(x_shape=(1, 40, 5, 5), m=4, kernel=(3, 3), pads=[1, 1, 1, 1], x_zero=-128,
                                      w_zero=[5, -7, 0, 100]), None),
}


@pytest.mark.parametrize("build", list(BUILDS))
@pytest.mark.parametrize("case", list(VECTOR_DOT_CASES))
def test_conv_as_vector_dot_products(case, build):
    """In C and, where this machine has them, in VNNI intrinsics (kernels/dot.j2 vnni_reduce)."""
    if BUILDS[build] is None:
        pytest.skip("this machine has no AVX-512 VNNI")
    kwargs, dots = VECTOR_DOT_CASES[case]
    source = check_conv(target="x86-avx512", channels_last=True, cflags=BUILDS[build], **kwargs)
    assert dots is None or ("int32_t s0_0 = 0;" in source) == dots
    assert dots is None or ("cglow_vnni_sum16(sums)" in source) == dots


def test_gathered_windows_are_padded_to_whole_vectors():
    """A 3x3 window of 16 channels, 144 values, is gathered and summed as 160 (instr/vector_dots.py GATHERED_STEP),
    the weights' padding zeros: the same integers."""
    source = check_conv(target="x86-avx512", channels_last=True, **VECTOR_DOT_CASES["padded, zero point -128"][0])
    assert "k < 160;" in source and "k < 144;" not in source


# AArch64's tiles sum them as dot products of signed inputs (Tiles.signed_dots, Arm's sdot): the zero point that needs
# no correction is 0 for int8 and 128 for uint8 (read as int8 with its top bit flipped), so that -128, an int8 input's
# after a ReLU, is folded, and gathered into the padding of a padded convolution's windows.
SIGNED_DOT_CASES = {
    "padded, zero point 0": (dict(x_shape=(1, 16, 6, 9), m=20, kernel=(3, 3), pads=[1, 1, 1, 1], x_zero=0), True),
    "unpadded, zero point -128 folded": (dict(x_shape=(1, 16, 6, 7), m=20, kernel=(3, 3), x_zero=-128), True),
    "unpadded, no bias, stride 2, batch 2": (dict(x_shape=(2, 12, 7, 9), m=17, kernel=(3, 3), strides=[2, 2],
                                                  bias=False, x_zero=-5, act="relu"), True),
    "uint8, unpadded, zero point folded": (dict(x_shape=(1, 12, 5, 6), m=9, kernel=(3, 3), x_dtype=UINT8,
                                                x_zero=3), True),
    "uint8, padded, zero point 128": (dict(x_shape=(1, 12, 5, 6), m=9, kernel=(3, 3), pads=[1, 1, 1, 1],
                                           x_dtype=UINT8, x_zero=128, y_dtype=INT8), True),
    "uint8 1x1 (a matrix product), zero point folded": (dict(x_shape=(1, 40, 5, 5), m=24, kernel=(1, 1),
                                                             x_dtype=UINT8, x_zero=0), True),
    "1x1, stride 2": (dict(x_shape=(1, 36, 6, 6), m=8, kernel=(1, 1), strides=[2, 2], x_zero=12), True),
    "in place, zero point 0": (dict(x_shape=(1, 16, 6, 9), m=16, kernel=(3, 3), pads=[1, 1, 1, 1], x_zero=0,
                                    act="relu"), True),
    "dilation 2, uint8 zero point 128": (dict(x_shape=(1, 8, 9, 9), m=6, kernel=(3, 3), pads=[2, 2, 2, 2],
                                              dilations=[2, 2], x_dtype=UINT8, x_zero=128), True),
    "padded, zero point -128": (dict(x_shape=(1, 16, 6, 9), m=20, kernel=(3, 3), pads=[1, 1, 1, 1], x_zero=-128),
                                True),
    "padded, uint8 zero point 3, dilation 2": (dict(x_shape=(1, 8, 9, 9), m=6, kernel=(3, 3), pads=[2, 1, 2, 1],
                                                    dilations=[2, 2], x_dtype=UINT8, x_zero=3), True),
    "short runs": (dict(x_shape=(1, 3, 6, 6), m=8, kernel=(3, 3), x_zero=0), False),
}


@pytest.mark.parametrize("case", list(SIGNED_DOT_CASES))
def test_conv_as_signed_dot_products(case):
    kwargs, dots = SIGNED_DOT_CASES[case]
    source = check_conv(target="aarch64", channels_last=True, **kwargs)
    assert ("int32_t s0_0 = 0;" in source) == dots
    assert ("(int8_t)(lp[k] ^ -128)" in source) == (dots and kwargs.get("x_dtype") == UINT8)


@pytest.mark.parametrize("kwargs", [
    dict(x_shape=(1, 8, 7, 9), m=8, kernel=(3, 3), group=8, pads=[1, 1, 1, 1], x_zero=-128, act="relu"),
    dict(x_shape=(1, 4, 8, 9), m=4, kernel=(3, 3), group=4, pads=[1, 1, 1, 1], strides=[2, 2], x_zero=5)])
def test_narrow_depthwise_widens_its_input_first(kwargs):
    """On x86-64, an 8-bit depthwise tile of fewer than 16 channels widens its kernel row's input to int32 in one loop
    first (kernels/conv.py _widened_spans): the same integers."""
    assert "wide[" in check_conv(target="x86-avx512", channels_last=True, **kwargs)


@pytest.mark.parametrize("case, kernel", [("1x1", "gemm"), ("1x1, stride 2", "conv"),
                                          ("padded, input zero point", "conv")])
def test_pointwise_conv_runs_as_a_gemm(case, kernel):
    """An unpadded stride-1 1x1 integer conv is computed by the matrix-product kernel (its input zero point
    folded into the bias); others by a conv kernel."""
    model, _ = conv_case(np.random.default_rng(0), **CONV_CASES[case])
    source = cglow.compile_model(model, name="net").c_source
    kernels = [n for n in functions(source) if re.fullmatch(r"net_\d+_\w+", n)]
    assert [re.sub(r"net_\d+_", "", n) for n in kernels] == [kernel], kernels


def random_conv_kwargs(seed: int) -> dict:
    rng = np.random.default_rng(100 + seed)
    spatial = int(rng.integers(1, 3))
    kernel = tuple(int(k) for k in rng.integers(1, 4, spatial))
    dilations = [int(d) for d in rng.integers(1, 3, spatial)]
    strides = [int(s) for s in rng.integers(1, 3, spatial)]
    pads = [int(p) for p in rng.integers(0, 3, 2 * spatial)]
    group = int(rng.choice([1, 2]))
    c, m = group * int(rng.integers(1, 5)), group * int(rng.integers(1, 5))
    size = [int(d * (k - 1) + 1 + rng.integers(0, 6)) for k, d in zip(kernel, dilations)]
    x_dtype = INT8 if rng.integers(0, 2) else UINT8
    per_channel = bool(rng.integers(0, 2))
    return dict(x_shape=(int(rng.integers(1, 3)), c) + tuple(size), m=m, kernel=kernel, group=group, pads=pads,
                strides=strides, dilations=dilations, x_dtype=x_dtype, per_channel=per_channel,
                x_zero=int(rng.integers(-20, 21)) + (128 if x_dtype == UINT8 else 0),
                w_zero=[int(z) for z in rng.integers(-3, 4, m)] if per_channel else int(rng.integers(-3, 4)),
                act=[None, "relu", (-0.5, 2.0)][int(rng.integers(0, 3))])


@pytest.mark.parametrize("seed", range(4))
def test_conv_random(seed):
    check_conv(seed=seed, **random_conv_kwargs(seed))


def functions(source: str) -> dict[str, str]:
    """Every function defined in generated C (static helpers, kernels, net_run): name -> text."""
    pattern = r"^(?:static |CGLOW_KERNEL )?\w+ \**(\w+)\([^;{]*?\)\n\{.*?^\}\n"
    return {m.group(1): m.group(0) for m in re.finditer(pattern, source, re.M | re.S)}


@pytest.mark.parametrize("case", ["one conv", "seven convs"])
def test_conv_kernels_are_integer_only_and_build_warning_free(case, tmp_path):
    """The C of int8 conv models (int8 in and out) computes in integers only: no float or double and no
    math library call in any function (the conv kernels requantize through cglow_requant or, where it gives
    the same, cglow_requant_high); and the file
    builds with no message at all under the strict flags, with each C compiler at hand, -O0 and -O2."""
    rng = np.random.default_rng(12)
    if case == "one conv":
        model, _ = conv_case(rng, **CONV_CASES["padded, input zero point"])
    else:
        model, _ = conv_chain(rng, CHAIN, (1, 4, 10, 9))
    compiled = cglow.compile_model(model, name="net")
    found = functions(compiled.c_source)
    convs = [name for name in found if re.fullmatch(r"net_\d+_conv\w*", name)]
    assert convs and "net_run" in found and {"cglow_requant", "cglow_requant_high"} & set(found), sorted(found)
    for name in convs:
        assert re.search(r"cglow_requant(_high)?\(", found[name]), found[name]
    for name, text in found.items():
        assert not re.search(r"\b(float|double)\b|\b[a-z]+f\(|\.[0-9]", text), f"{name}:\n{text}"
    (tmp_path / "net.c").write_text(compiled.c_source)
    (tmp_path / "net.h").write_text(compiled.h_source)
    compilers = [cc for cc in ("cc", "gcc", "clang") if shutil.which(cc)]
    assert compilers
    for cc in compilers:
        for opt in ("-O0", "-O2"):
            result = subprocess.run([cc, opt, *STRICT_FLAGS, "-c", "net.c", "-o", f"net-{cc}{opt}.o"],
                                    cwd=tmp_path, capture_output=True, text=True)
            assert result.returncode == 0 and result.stderr == "", f"{cc} {opt}: {result.stderr}"


def test_a_layers_channels_share_one_literal_shift():
    """Per-channel weight scales within a factor 10 (shifts 4 apart at most): the convolution requantizes with
    one shift, a literal of its kernel (no array of shifts among the weights); this one, its output planar,
    adds its bias in the expression (Epilogue.folded), and gives the reference's integers."""
    model, reference = conv_case(np.random.default_rng(31), **CONV_CASES["stride 2"])
    compiled = cglow.compile_model(model, name="net", options=Options(target="cortex-m4"))
    source = compiled.c_source
    assert re.search(r"cglow_requant_high\(acc\[i\]\[j\] \+ e\d+\[[^\]]+\], e\d+\[[^\]]+\], \d+, ", source)
    assert "shifts less 33" not in source
    x = rand_q(np.random.default_rng(32), (1, 3, 9, 8), INT8)
    assert np.array_equal(cglow.build(compiled)(x)[0], reference(x))
