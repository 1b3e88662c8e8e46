"""The planner of patch-based execution (instr/patches.py): which span of the program runs in tiles, how many,
and whether tiles recompute their halos.

Every span that qualifies (patches.Spans) is tried with a range of tile sizes, streamed rows always and
patches (halos recomputed) where the user allows extra multiply-accumulates (`--max-recompute PERCENT` of
the model's). Each candidate is measured by the floor of its instruction list as the patch pass writes it
(the most bytes alive at once: cheap, and what the scheduler and the allocator then reach or nearly). By
default, among the candidates whose added kernel calls cost at most a tenth of the model's time (CALL_CYCLES),
the two of the least floors are compiled for their real arenas, and the smaller is kept if it is smaller
than the whole-tensor plan's: RAM first, as microcontroller users choose their chip by it. The flash its tiles
add (their kernels' code) is reported with the plan; `--ram-budget` with room for whole tensors keeps them.

With `--ram-budget BYTES` the planner looks for the fastest plan whose arena fits instead: the whole-tensor
plan if it fits, else the candidates in order of extra MACs and then instructions (each tile's kernels are
calls of their own), each compiled until one fits, and at last the one of the least floor; when none fits,
one error line gives the smallest arena reachable.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..errors import CglowError
from ..instr.ir import Program
from ..instr.liveness import floor, lifetimes
from ..instr.patches import PatchPlan, Spans, patch, span_height, tiles_of
from ..kernels.code_size import flash_bytes
from ..tiles import TILES, Tiles
from .arena import Plan

ROWS = (1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32, 48)  # rows of the span's output per tile, tried
TRIES = 4  # with a budget: the most candidates compiled before giving up
COMPILED = 2  # without: the candidates of the least floors compiled, the smallest arena kept
# What a kernel call of a tile costs, measured on a Cortex-M4 (the QEMU profile and timing model; int8 kws in 7
# tiles, vww in 6, resnet8 in 16: 2100, 1800 and 1700 cycles per instruction added, the calls, their loops' set-up
# and remainders, the rows kept), against what the model's multiply-accumulates cost (int8: about 1.7 cycles
# each). By default a plan may add instructions worth at most OVERHEAD of the model's cycles.
CALL_CYCLES, MAC_CYCLES, OVERHEAD = 2500, 1.7, 0.10


@dataclass(frozen=True)
class Candidate:
    plan: PatchPlan
    floor: int         # bytes alive at most, in the patch pass's order
    extra_macs: int
    instrs: int


@dataclass(frozen=True)
class Patched:
    """What a compiled model runs in patches: for `cglow info`, --report and --dump-ir."""
    plan: PatchPlan
    nodes: tuple[str, ...]   # the nodes of the span's instructions, in order
    height: int              # rows of the span's output
    tile_rows: int           # rows of it each tile computes (the last tile: what remains)
    halo: int                # the most rows of one value that two neighbouring tiles both hold
    extra_macs: int
    macs: int                # the model's, without patches
    whole_arena: int         # bytes: the arena without patches
    flash_added: int         # bytes of code and weights the tiles' kernels add, estimated (kernels/code_size.py)

    def lines(self) -> list[str]:
        kind = "patches (halos recomputed)" if self.plan.recompute else "streamed rows (halo rows kept)"
        share = 100 * self.extra_macs / self.macs if self.macs else 0.0
        return [f"{kind} over {len(self.nodes)} kernels, from '{self.nodes[0]}' to '{self.nodes[-1]}'",
                f"{self.plan.tiles} tiles of {self.tile_rows} of its {self.height} output rows, halo up to "
                f"{self.halo} rows", f"extra MACs: {self.extra_macs} ({share:.1f}%)",
                f"arena without patches: {self.whole_arena} bytes ({self.whole_arena / 1024:.1f} KiB)",
                f"flash added (code and weights, estimated): {self.flash_added} bytes "
                f"({self.flash_added / 1024:.1f} KiB)"]


def summary(fused: Program, chosen: Candidate, whole: tuple[Program, Plan], patched: Program,
            tiles: Tiles = TILES["generic"]) -> Patched:
    """The chosen plan described, from the programs compiled with whole tensors and with it."""
    plan = chosen.plan
    height, rows, halo = tiles_of(fused, plan)
    nodes = tuple(i.node for i in fused.instrs[plan.first:plan.last + 1])
    return Patched(plan, nodes, height, rows, halo, chosen.extra_macs, sum(i.macs() for i in fused.instrs),
                   whole[1].size, flash_bytes(patched, tiles) - flash_bytes(whole[0], tiles))


Finish = Callable[[PatchPlan | None], tuple[Program, Plan]]  # the rest of the passes and the allocation


def candidates(fused: Program, max_recompute: float, align: int = 16) -> list[Candidate]:
    """Every plan within the extra-MAC bound, measured (buffers aligned to `align` bytes); `fused`: the program
    after map and epilogue fusion."""
    spans = Spans(fused)
    macs = sum(i.macs() for i in fused.instrs)
    found = []
    for first, last in spans.all():
        height = span_height(spans.forms[last])
        for tiles in sorted({-(-height // rows) for rows in ROWS if rows < height}):
            for recompute in (False, True) if max_recompute > 0 else (False,):
                plan = PatchPlan(first, last, tiles, recompute)
                patched = patch(fused, plan, spans)
                extra = sum(i.macs() for i in patched.instrs) - macs
                if extra <= max_recompute / 100 * macs:
                    found.append(Candidate(plan, floor(lifetimes(patched, align)), extra, len(patched.instrs)))
    return found


def choose(fused: Program, finish: Finish, max_recompute: float = 0.0, budget: int | None = None,
           align: int = 16, tiles: Tiles = TILES["generic"]) -> Patched | None:
    """The plan to compile with, described, or None for the whole-tensor plan; `tiles`, the target's register
    tiles, which the kernels' code depends on."""
    whole = finish(None)
    chosen = _choose(fused, finish, whole, max_recompute, budget, align)
    return None if chosen is None else summary(fused, chosen, whole, finish(chosen.plan)[0], tiles)


def _choose(fused: Program, finish: Finish, whole: tuple[Program, Plan], max_recompute: float,
            budget: int | None, align: int) -> Candidate | None:
    if budget is not None and whole[1].size <= budget:
        return None
    found = candidates(fused, max_recompute, align)
    if budget is None:
        calls = OVERHEAD * MAC_CYCLES * sum(i.macs() for i in fused.instrs) / CALL_CYCLES
        cheap = sorted((c for c in found if c.instrs - len(fused.instrs) <= calls),
                       key=lambda c: (c.floor, c.extra_macs, c.instrs))
        sizes = {c: finish(c.plan)[1].size for c in cheap[:COMPILED]}
        best = min(sizes, key=lambda c: (sizes[c], c.instrs), default=None)
        return None if best is None or sizes[best] >= whole[1].size else best
    smallest = whole[1].size
    fitting = sorted((c for c in found if c.floor <= budget), key=lambda c: (c.extra_macs, c.instrs, c.floor))
    least = [min(found, key=lambda c: (c.floor, c.extra_macs, c.instrs))] if found else []
    for c in fitting[:TRIES] + least:  # the fastest that may fit, then the one of the least floor
        size = finish(c.plan)[1].size
        if size <= budget:
            return c
        smallest = min(smallest, size)
    raise CglowError(f"--ram-budget {budget}: no plan fits; the smallest arena reachable is {smallest} bytes"
                     + ("" if max_recompute else " without recomputation (--max-recompute allows more)"))
