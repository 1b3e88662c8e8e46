"""Multiply-accumulates of a compiled program: what `cglow info` reports and the benchmarks divide by.

Only the Gemm and Conv instructions count: a Gemm counts prod(out.shape) * K, a Conv prod(out.shape) *
(C/group) * KH * KW. Map, Reduce, Pool and Gather (activations, softmax, normalization, pooling, resizing)
are not counted. MatMul, Gemm, Conv, attention and recurrent ops count through what they lower to; a
strided ConvTranspose lowers to a convolution over its input spread out with zeros, so it counts those
zero products too."""
from __future__ import annotations

import math

from ..instr.ir import Conv, Gemm, Program


def instr_macs(instr) -> int:
    """The multiply-accumulates of one instruction (0 for anything but a Gemm or a Conv)."""
    if isinstance(instr, Gemm):
        return math.prod(instr.out.shape) * instr.a.shape[-1]
    if isinstance(instr, Conv):
        return math.prod(instr.out.shape) * math.prod(instr.w.shape[1:])
    return 0


def macs(program: Program) -> int:
    """The multiply-accumulates of the program's Gemm and Conv instructions."""
    return sum(instr_macs(instr) for instr in program.instrs)
