"""Render each primitive of the instruction IR into one static C function: the dispatch, by the primitive's name
(instr/ir.py), to the module that renders it (loops.py: Map, Reduce, Gather, Scatter, Pool, Compact; gemm.py: Gemm;
Conv), each from its template."""
from __future__ import annotations

import numpy as np

from ..instr.ir import Instr, Reduce
from ..tiles import TILES, Tiles
from .conv import conv_kernel
from .gemm import gemm_kernel
from .kernel import Kernel
from .loops import (arg_reduce_kernel, compact_kernel, gather_kernel, map_kernel, pool_kernel, reduce_kernel,
                    scatter_kernel)


def reducing_kernel(fn: str, r: Reduce, dtypes: dict[int, np.dtype], tiles: Tiles) -> Kernel:
    """A reduction's kernel: one that finds an extreme's index, or one that combines values (down columns on a
    target with vector registers, loops.py _column_sums)."""
    if r.kind.startswith("arg"):
        return arg_reduce_kernel(fn, r, dtypes)
    return reduce_kernel(fn, r, dtypes, vectors=not tiles.scalar)


RENDER = {"map": map_kernel, "reduce": reducing_kernel, "gather": gather_kernel, "scatter": scatter_kernel,
          "pool": pool_kernel, "gemm": gemm_kernel, "conv": conv_kernel, "compact": compact_kernel}
TILED = ("gemm", "conv", "reduce")  # the kernels that take the target's register tile


def render(fn: str, instr: Instr, dtypes: dict[int, np.dtype], tiles: Tiles = TILES["generic"]) -> Kernel:
    """dtypes: the element type of every buffer, by id; tiles: the target's register tile."""
    kernel = RENDER[instr.primitive]
    return kernel(fn, instr, dtypes, tiles) if instr.primitive in TILED else kernel(fn, instr, dtypes)
