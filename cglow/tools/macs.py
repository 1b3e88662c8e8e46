"""Multiply-accumulates of a compiled program: what `cglow info` reports and the benchmarks divide by.

Only the Gemm and Conv instructions count (their macs(), instr/ir.py): a Gemm counts prod(out.shape) * K, a
Conv prod(out.shape) * (C/group) * KH * KW. Map, Reduce, Pool, Gather, Scatter and Compact (activations, softmax,
normalization, pooling, resizing, selections) are not counted. MatMul, Gemm, Conv, attention and recurrent ops count
through what they lower to; a strided ConvTranspose lowers to a convolution over its input spread out with zeros, so
it counts those zero products too."""
from __future__ import annotations

from ..instr.ir import Program


def macs(program: Program) -> int:
    """The multiply-accumulates of the program's Gemm and Conv instructions."""
    return sum(instr.macs() for instr in program.instrs)
