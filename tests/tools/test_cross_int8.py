"""Quantized models on the cross targets: the image run under QEMU gives the same integers as the host
build of the same C (the integer kernels have no float and no implementation-defined arithmetic to differ
on)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import cglow
from cglow import zoo
from cglow.tools import cross
from cglow.options import Options
from cglow.quantize import quantize_model

from tests.mobile_block import int8, mobile_block
from tests.quantized import quantized
from tests.qdq import UINT8, conv_chain, extreme_q, rand_q
from tests.util import need_target

pytest.importorskip("onnxruntime")

MODELS = ("kws", "resnet8")
CASES = [(model, target) for model in MODELS for target in ("cortex-m4", "cortex-m3", "cortex-m55", "riscv32",
                                                            "aarch64-linux", "rv64gcv")]


@pytest.mark.parametrize("model, target_name", CASES)
def test_same_integers_as_the_host(model, target_name):
    target = need_target(target_name)
    compiled = cglow.compile_model(quantized(model, "qdq", True), options=Options(target=target.tiles))
    rng = np.random.default_rng(3)
    inputs = [rng.integers(-128, 128, t.shape).astype(t.dtype) for t in compiled.inputs]
    run = cross.run_image(cross.build_image(compiled, inputs, target), compiled, target, count=False)
    for got, want in zip(run.outputs, cglow.build(compiled)(*inputs)):
        assert got.dtype == want.dtype and np.array_equal(got, want)


def test_aarch64_image_runs_sdot():
    """The aarch64-linux preset builds for Armv8.2 with the dot product instructions (cglow/tools/targets.py), so that
    the int8 kernels run as sdot there (tiles.py signed_dots): QEMU's Cortex-A53, an Armv8.0 core without them, stops
    on the image that its default cpu runs (test_same_integers_as_the_host)."""
    target = need_target("aarch64-linux")
    compiled = cglow.compile_model(quantized("kws", "qdq", True), options=Options(target=target.tiles))
    rng = np.random.default_rng(3)
    inputs = [rng.integers(-128, 128, t.shape).astype(t.dtype) for t in compiled.inputs]
    a53 = replace(target, run=("qemu-aarch64", "-cpu", "cortex-a53", "{image}"))
    with pytest.raises(RuntimeError, match="exited with -4"):  # SIGILL
        cross.run_image(cross.build_image(compiled, inputs, target), compiled, a53, count=False)


# uint8 activations through depthwise convolutions of 6 channels (a tile of four channels a word, summed as
# its even lanes and then its odd ones, mac2.c's SMLABB/SMLATT on the DSP targets, and a remainder tile of
# two), stride 1 and 2, padded on some sides only
DEPTHWISE_CHAIN = [dict(m=6, kernel=(3, 3), pads=[1, 1, 1, 1], y_dtype=UINT8, y_zero=120),
                   dict(m=6, kernel=(3, 3), group=6, pads=[1, 0, 1, 1], act="relu", y_dtype=UINT8, y_zero=0),
                   dict(m=6, kernel=(3, 3), group=6, pads=[0, 1, 1, 0], strides=[2, 2], y_dtype=UINT8,
                        y_zero=131),
                   dict(m=8, kernel=(1, 1), y_dtype=UINT8, y_zero=128)]


def check_uint8_chain(target_name: str, layers, shape, seed: int, x_zero: int, opts=(cross.OPT_FLAGS,),
                      cflags: tuple[str, ...] = ()) -> str:
    """A chain of uint8 convolutions (conv_chain) compiled for a cross target: the image under QEMU (built with
    each of `opts`, and `cflags` after the target's) and the host build of the same C (the helpers' portable code)
    give the NumPy integer reference's outputs on an extreme and a random input. Returns the C. Whole tensors (a
    budget with room for them): a kernel per layer, the variants under test (the patch tests run chains in tiles)."""
    target = need_target(target_name)
    target = replace(target, cflags=target.cflags + cflags)
    rng = np.random.default_rng(seed)
    model, reference = conv_chain(rng, layers, shape, x_dtype=UINT8, x_zero=x_zero)
    compiled = cglow.compile_model(model, options=Options(target=target.tiles, ram_budget=1 << 30))
    host = cglow.build(compiled)
    for x in (extreme_q(rng, shape, UINT8), rand_q(rng, shape, UINT8)):
        for opt in opts:
            run = cross.run_image(cross.build_image(compiled, [x], target, opt), compiled, target, count=False)
            assert np.array_equal(run.outputs[0], reference(x)), opt
        assert np.array_equal(host(x)[0], reference(x))
    return compiled.c_source


@pytest.mark.parametrize("target_name", ["cortex-m4", "cortex-m33"])
def test_uint8_depthwise_under_qemu_matches_the_integer_reference(target_name):
    assert "cglow_mac2(acc" in check_uint8_chain(target_name, DEPTHWISE_CHAIN, (1, 3, 9, 10), seed=21, x_zero=125)


# uint8 activations through AArch64's signed dot products (tiles.py signed_dots: read as int8 with their top bit
# flipped, kernels/gemm.py vector_reads; sdot under the preset's -march): after a first layer over the planar input,
# a 3x3 convolution whose zero point (0 once the importer folded 128 into the bias) is folded to 128, a padded one at
# the plain zero point 128 (its windows gathered, the padding 128 too), a 1x1 (a matrix product) folding 0, and a
# padded one whose zero point (125) keeps the tiles over output channels; 7 columns, so a remainder tile of one
SIGNED_DOT_CHAIN = [dict(m=16, kernel=(3, 3), pads=[1, 1, 1, 1], y_dtype=UINT8, y_zero=128),
                    dict(m=32, kernel=(3, 3), y_dtype=UINT8, y_zero=128),
                    dict(m=32, kernel=(3, 3), pads=[1, 1, 1, 1], act="relu", y_dtype=UINT8, y_zero=0),
                    dict(m=40, kernel=(1, 1), y_dtype=UINT8, y_zero=125),
                    dict(m=16, kernel=(3, 3), pads=[1, 1, 1, 1], y_dtype=UINT8, y_zero=128),
                    dict(m=8, kernel=(1, 1), y_dtype=UINT8, y_zero=120)]


@pytest.mark.parametrize("cflags", [(), ("-march=armv8.2-a+dotprod+i8mm",)])
def test_uint8_signed_dot_products_under_qemu_match_the_integer_reference(cflags):
    """With the preset's flags, and with Armv8.6's mixed-sign usdot on offer (i8mm), which gcc 12.2 made of an uint8
    byte converted to int8 and got wrong (kernels/gemm.py vector_reads)."""
    source = check_uint8_chain("aarch64-linux", SIGNED_DOT_CHAIN, (1, 3, 9, 9), seed=25, x_zero=131,
                               opts=(cross.OPT_FLAGS, ("-O3",)), cflags=cflags)
    assert "(int8_t)(lp[k] ^ -128)" in source
    # three gathered convolutions, a run of tiles and a remainder each: the last one's zero point, 125, gathered into
    # its padding (Conv.x_pad)
    assert source.count("*const stage = ") == 6


# uint8 activations through convolutions that widen their inputs into a panel (instr/passes.py
# widen_inputs; runtime_c/widen4.c and dot2.c): the first gathers its windows from the planar input (im2col),
# the 1x1s widen their pixels, the second as a matrix product, the fifth strided; 7 columns, so a remainder
# tile of one, and an odd number of channels in the second and the last, so a channel pair of one (kws runs
# one in place, in test_same_integers_as_the_host)
PANEL_CHAIN = [dict(m=48, kernel=(3, 3), pads=[1, 1, 1, 1], y_dtype=UINT8, y_zero=118),
               dict(m=9, kernel=(1, 1), act="relu", y_dtype=UINT8, y_zero=0),
               dict(m=64, kernel=(3, 3), pads=[1, 1, 1, 1], y_dtype=UINT8, y_zero=140),
               dict(m=16, kernel=(3, 3), pads=[1, 1, 1, 1], y_dtype=UINT8, y_zero=121),
               dict(m=16, kernel=(1, 1), strides=[2, 2], y_dtype=UINT8, y_zero=125),
               dict(m=7, kernel=(1, 1), y_dtype=UINT8, y_zero=127)]


@pytest.mark.parametrize("target_name", ["cortex-m4", "cortex-m33", "cortex-m55", "cortex-m7"])
def test_widened_inputs_under_qemu_match_the_integer_reference(target_name):
    source = check_uint8_chain(target_name, PANEL_CHAIN, (1, 16, 6, 7), seed=22, x_zero=131)
    assert source.count("int32_t *restrict panel)") == 3
    assert source.count("smlad %[a") > 20  # the hand-scheduled steps (kernels/arm_steps.py) are in the C


def test_hand_scheduled_steps_at_every_level():
    """The assembly steps need 13 registers at most, so they build where r7 is the frame pointer
    (-fno-omit-frame-pointer; at -O0 the kernels take their C, runtime_c/dsp_asm.c), and give the reference's
    integers at every level: over panels (pair_step), and in a last layer whose panel would not fit under the
    arena's peak, over 8-bit words (dot_step)."""
    chain = PANEL_CHAIN[:3] + [dict(m=64, kernel=(3, 3), pads=[1, 1, 1, 1], y_dtype=UINT8, y_zero=124)]
    source = check_uint8_chain("cortex-m4", chain, (1, 16, 6, 7), seed=24, x_zero=131,
                               opts=(("-O0",), ("-O1",), ("-Os",), ("-O3",), ("-O2", "-fno-omit-frame-pointer")))
    assert "sxtab16 %[x" in source and source.count("int32_t *restrict panel)") == 2


# windows gathered into the panel (im2col) where the dot products would run over short runs: a planar
# 3-channel input under a stride-2 3x3 kernel, 27 values a window, its weights padded to 28 (vww's first
# layer), and one channel under a 5x4 kernel (kws's): padding rows, edge tiles with padding columns, and a
# remainder tile of one column (a wider second layer, so that the panel fits under the arena's peak)
IM2COL_CHAINS = {"planar": ([dict(m=8, kernel=(3, 3), pads=[1, 1, 1, 1], strides=[2, 2], y_dtype=UINT8, y_zero=120),
                             dict(m=4, kernel=(1, 1), y_dtype=UINT8, y_zero=128)], (1, 3, 11, 14)),
                 "one channel": ([dict(m=12, kernel=(5, 4), pads=[2, 1, 2, 2], strides=[2, 2], y_dtype=UINT8, y_zero=126),
                                  dict(m=24, kernel=(1, 1), y_dtype=UINT8, y_zero=130)], (1, 1, 13, 14))}


@pytest.mark.parametrize("target_name", ["cortex-m4", "cortex-m33"])
@pytest.mark.parametrize("chain", IM2COL_CHAINS)
def test_gathered_windows_under_qemu_match_the_integer_reference(target_name, chain):
    layers, shape = IM2COL_CHAINS[chain]
    source = check_uint8_chain(target_name, layers, shape, seed=23, x_zero=133)
    assert source.count("*const stage = ") == 3  # the runs of output columns: a tile in, and one at each edge


def test_int8_transformer_under_qemu_gives_the_host_integers():
    """The transformer quantized by cglow (int8 matrix products between float LayerNorm and Softmax). Its
    kernels kept out of net_run with gcc's noinline, gcc 12 -O2 dropped three of their calls; noipa
    (runtime_c/kernel.c) keeps them."""
    target = need_target("cortex-m4")
    model = zoo.build("transformer")
    rng = np.random.default_rng(4)
    shapes = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input}
    compiled = cglow.compile_model(
        quantize_model(model, {n: rng.standard_normal((4, *s)).astype(np.float32) for n, s in shapes.items()}),
        options=Options(target=target.tiles))
    inputs = [rng.integers(-128, 128, t.shape).astype(t.dtype) for t in compiled.inputs]
    run = cross.run_image(cross.build_image(compiled, inputs, target), compiled, target, count=False)
    for got, want in zip(run.outputs, cglow.build(compiled)(*inputs)):
        assert got.dtype == want.dtype and np.array_equal(got, want)


def test_patched_span_gives_the_whole_plans_integers_under_qemu():
    """A span run in streamed rows (a budget below the whole-tensor arena asks for them) gives, in the Cortex-M4
    image, the integers the whole-tensor plan gives on the host."""
    target = need_target("cortex-m4")
    model = int8(mobile_block())
    whole = cglow.compile_model(model, options=Options(target=target.tiles, ram_budget=1 << 40))
    patched = cglow.compile_model(model, options=Options(target=target.tiles, ram_budget=whole.arena_bytes // 2))
    assert patched.patches is not None and whole.patches is None
    rng = np.random.default_rng(5)
    inputs = [rng.integers(-128, 128, t.shape).astype(t.dtype) for t in patched.inputs]
    run = cross.run_image(cross.build_image(patched, inputs, target), patched, target, count=False)
    for got, want in zip(run.outputs, cglow.build(whole)(*inputs)):
        assert np.array_equal(got, want)
