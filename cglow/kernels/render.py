"""Render each primitive of the instruction IR into one static C function: the dispatch to the module that
renders it (loops.py: Map, Reduce, Gather, Pool; gemm.py: Gemm; conv.py: Conv), each from its template."""
from __future__ import annotations

import numpy as np

from ..instr.ir import Conv, Gather, Gemm, Instr, Map, Pool, Reduce
from ..tiles import TILES, Tiles
from .conv import conv_kernel
from .gemm import gemm_kernel
from .kernel import Kernel
from .loops import arg_reduce_kernel, gather_kernel, map_kernel, pool_kernel, reduce_kernel


RENDER = {Map: map_kernel, Gemm: gemm_kernel, Conv: conv_kernel, Pool: pool_kernel, Gather: gather_kernel}
PRIMITIVE_NAMES = {Map: "map", Reduce: "reduce", Gemm: "gemm", Conv: "conv", Pool: "pool", Gather: "gather"}


def render(fn: str, instr: Instr, dtypes: dict[int, np.dtype], tiles: Tiles = TILES["generic"]) -> Kernel:
    """dtypes: the element type of every buffer, by id; tiles: the target's register tile."""
    if isinstance(instr, Reduce):
        return (arg_reduce_kernel if instr.kind.startswith("arg") else reduce_kernel)(fn, instr, dtypes)
    if isinstance(instr, (Conv, Gemm)):
        return RENDER[type(instr)](fn, instr, dtypes, tiles)
    return RENDER[type(instr)](fn, instr, dtypes)
