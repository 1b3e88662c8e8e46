"""The C statements of a program's kernels, which estimate its machine code (tools/code_size.py measured the bytes
a statement takes), and with its weights its flash: what the patch planner weighs against the RAM that tiles
save."""
from __future__ import annotations

import re

from ..instr.ir import Program, kernels
from ..tiles import Tiles
from .render import render

BYTES_PER_STATEMENT = {True: 9, False: 17}  # by Tiles.scalar (tools/code_size.py: how they were measured)
TRIP_COUNT = re.compile(r"^for \(.*; \w+ < (\d+); [^;]*\) \{$")


def statements(body: str, unrolled: bool) -> int:
    """The statements of one function body; a register-tile loop's once per iteration when `unrolled`."""
    count, weights, tile_loop = 0, [1], False
    for line in body.splitlines():
        text = line.strip()
        if text.startswith("}") and len(weights) > 1:
            weights.pop()
        count += weights[-1] * (1 if text.startswith(("for ", "if ", "while ")) else text.count(";"))
        if text.endswith("{"):
            trips = TRIP_COUNT.match(text) if tile_loop and unrolled else None
            weights.append(weights[-1] * (int(trips[1]) if trips else 1))
        tile_loop = text in ("CGLOW_TILE_LOOP", "CGLOW_TILE_UNROLL")
    return count


def kernel_bytes(prog: Program, tiles: Tiles) -> int:
    """The estimated machine code of the program's kernels, each distinct body once (as emit_c writes them)."""
    dtypes = {b.id: b.dtype for b in prog.buffers}
    bodies = {render("KERNEL", instr, dtypes, tiles).text.strip().split("\n", 1)[1] for instr in kernels(prog.instrs)}
    return sum(statements(body, tiles.scalar) for body in bodies) * BYTES_PER_STATEMENT[tiles.scalar]


def flash_bytes(prog: Program, tiles: Tiles) -> int:
    """The estimated flash of the program: its kernels' machine code and its weights."""
    return kernel_bytes(prog, tiles) + sum(b.nbytes for b in prog.weights())
