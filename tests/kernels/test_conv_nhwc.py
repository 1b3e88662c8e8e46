"""The channels-last convolution kernel (kernels/conv_nhwc.c.j2) against NumPy, at the register tiles of a
vector target and of a scalar one (whose depthwise tile differs), built and run on the host.

Each seed draws a dense, grouped or depthwise convolution (depthwise most often: its tiles slide over the
input columns and render the image's edge tiles one by one), with strides, dilations and pads, widths that
span interior and edge tiles, channel counts that leave a shorter channel tile, and a bias, ReLU or residual
epilogue. In-place cases (stride 1, the output the input's shape, the input dead after the convolution) go
through the scratch ring: the test checks that the ring is there.
"""
from __future__ import annotations

import numpy as np
import pytest

import cglow
from cglow.compiler import compile_program
from cglow.emit_c.emit import TensorInfo
from cglow.graph.geometry import window
from cglow.graph.ir import Node
from cglow.instr.expr import ACC, Input, call
from cglow.instr.ir import Conv, Epilogue, Map, Pool, Program
from cglow.options import Options
from tests.programs import RTOL, Builder, acc_atol, conv_ref, rand

TARGETS = ("generic", "x86-avx512", "cortex-m4")  # tiles 4 x 16, 8 x 32, 6 x 4 (8 x 2 depthwise)
NHWC = (0, 3, 1, 2)  # the permutation that shows an [N, H, W, C] buffer as [N, C, H, W]


def draw(rng: np.random.Generator, in_place: bool):
    """(grouping, group, C/group, M/group, kernel, strides, dilations, pads [t, l, b, r], input [H, W])."""
    grouping = ["dense", "grouped", "depthwise", "depthwise"][int(rng.integers(4))]
    if grouping == "dense":
        group, cg, mg = 1, int(rng.integers(1, 5)), int(rng.integers(1, 10))
    elif grouping == "grouped":
        group, cg, mg = int(rng.integers(2, 4)), int(rng.integers(1, 4)), int(rng.integers(1, 4))
    else:
        group, cg, mg = int(rng.integers(1, 12)), 1, 1
    if in_place:  # the output has the input's shape: M = C, stride 1, pads that add up to the span - 1
        mg = cg
    kernel = tuple(int(k) for k in rng.integers(1, 6, 2))
    strides = (1, 1) if in_place else tuple(int(s) for s in rng.integers(1, 4, 2))
    dilations = tuple(int(d) for d in rng.integers(1, 3, 2))
    span = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    if in_place:
        begin = [int(rng.integers(0, s)) for s in span]
        pads = (begin[0], begin[1], span[0] - 1 - begin[0], span[1] - 1 - begin[1])
    else:
        pads = tuple(int(rng.integers(0, kernel[i % 2])) for i in range(4))
    low = [max(1, s - pads[i] - pads[i + 2]) for i, s in enumerate(span)]
    low[0] = max(low[0], pads[0] + 2) if in_place else low[0]  # taller than the ring
    spatial = (low[0] + int(rng.integers(0, 4)), low[1] + int(rng.integers(0, 22)))
    return grouping, group, cg, mg, kernel, strides, dilations, pads, spatial


def conv_case(seed: int, target: str):
    rng = np.random.default_rng([TARGETS.index(target), seed])
    in_place = bool(rng.random() < 0.3)
    grouping, group, cg, mg, kernel, strides, dilations, pads, spatial = draw(rng, in_place)
    n, c, m = int(rng.integers(1, 3)), group * cg, group * mg
    node = Node("Conv", "conv", (), (), dict(strides=list(strides), dilations=list(dilations), pads=list(pads)))
    win = window(node, spatial, kernel, False)
    b = Builder()
    x = b.input(rand(rng, (n,) + spatial + (c,))).permute(NHWC)
    w = b.const(rand(rng, kernel + (cg, m))).permute((3, 2, 0, 1))  # packed [KH][KW][C/group][M]
    shape = (n, m) + win.out
    want = conv_ref(x.value, w.value, win, group)
    epi, note = Epilogue(), "none"
    kind = int(rng.integers(3))
    if kind == 1:
        bias = b.const(rand(rng, (m,))).reshape((m, 1, 1)).broadcast_to(shape)
        epi, note = Epilogue(call("fmaxf", ACC + Input(0), 0.0), (bias.view,)), "bias relu"
        want = np.maximum(want + bias.value, 0.0)
    elif kind == 2:
        residual = b.input(rand(rng, (n,) + win.out + (m,))).permute(NHWC)
        epi, want, note = Epilogue(ACC + Input(0), (residual.view,)), want + residual.value, "residual"
    out = b.output((n,) + win.out + (m,)).permute(NHWC)
    if in_place:  # x copied into the arena dies at the conv, whose arena result a 1x1 max pool copies out
        xa, ya = b.arena((n,) + spatial + (c,)).permute(NHWC), b.arena((n,) + win.out + (m,)).permute(NHWC)
        one = window(Node("MaxPool", "pool", (), (), dict(strides=[1, 1], dilations=[1, 1], pads=[0] * 4)),
                     win.out, (1, 1), False)
        instrs = [Map(xa, (x.view,), Input(0), "copy"), Conv(ya, xa, w.view, win, group, epi, "conv"),
                  Pool(out, ya, "max", one, False, "pool")]
    else:
        instrs = [Conv(out, x.view, w.view, win, group, epi, "conv")]
    about = f"{grouping} n={n} c={c} m={m} group={group} {win} epilogue {note} in_place={in_place}"
    return b, instrs, want, acc_atol(cg * kernel[0] * kernel[1], x.value, w.value), about, in_place


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("seed", range(24))
def test_conv_nhwc(seed, target):
    b, instrs, want, atol, about, in_place = conv_case(seed, target)
    prog = Program("k", tuple(b.buffers), tuple(instrs), tuple(b.inputs), tuple(b.outputs))
    compiled = compile_program(prog, "k", inputs=[TensorInfo(f"x{i}", a.shape) for i, a in enumerate(b.feeds)],
                               outputs=[TensorInfo(f"y{i}", s) for i, s in enumerate(b.out_shapes)],
                               options=Options(target=target))
    conv = next(i for i in compiled.program.instrs if isinstance(i, Conv))  # a 1x1 window's pixels regrouped
    assert ("float *ring" in compiled.c_source) == (in_place and conv.out.shape[2] > 1), about  # into one row: no ring
    (got,) = cglow.build(compiled)(*b.feeds)
    np.testing.assert_allclose(got, np.transpose(want, (0, 2, 3, 1)), rtol=RTOL, atol=atol, err_msg=about)
