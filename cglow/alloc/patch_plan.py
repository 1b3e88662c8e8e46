"""The planner of patch-based execution (instr/patches.py): which span of the program runs in tiles, how many,
and whether tiles recompute their halos.

Every span that qualifies (patches.Spans) is tried with a range of tile counts, streamed rows always and
patches (halos recomputed) where the user allows extra multiply-accumulates (`--max-recompute PERCENT` of
the model's). Each candidate is measured by the floor of its instruction list as the patch pass writes it
(the most bytes alive at once: cheap, and what the scheduler and the allocator then reach or nearly); the
best one is then compiled for its real arena, and kept only if that is smaller than the whole-tensor plan's.

With `--ram-budget BYTES` the planner looks for the fastest plan whose arena fits instead: the whole-tensor
plan if it fits, else the candidates in order of extra MACs and then instructions (each tile's kernels are
calls of their own), each compiled until one fits; when none does, one error line gives the smallest arena
reachable.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..errors import CglowError
from ..instr.ir import Program
from ..instr.liveness import floor, lifetimes
from ..instr.patches import PatchPlan, Spans, patch
from .arena import Plan

TILES = (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)  # tile counts tried (those up to the output's rows)
TRIES = 4  # with a budget: the most candidates compiled before giving up


@dataclass(frozen=True)
class Candidate:
    plan: PatchPlan
    floor: int         # bytes alive at most, in the patch pass's order
    extra_macs: int
    instrs: int


Finish = Callable[[PatchPlan | None], tuple[Program, Plan]]  # the rest of the passes and the allocation


def candidates(fused: Program, max_recompute: float) -> list[Candidate]:
    """Every plan within the extra-MAC bound, measured; `fused`: the program after map and epilogue fusion."""
    spans = Spans(fused)
    macs = sum(i.macs() for i in fused.instrs)
    found = []
    for first, last in spans.all():
        height = spans.forms[last].out.shape[2]
        counts = sorted({min(t, height) for t in TILES})
        for tiles in counts:
            for recompute in (False, True) if max_recompute > 0 else (False,):
                plan = PatchPlan(first, last, tiles, recompute)
                patched = patch(fused, plan, spans)
                extra = sum(i.macs() for i in patched.instrs) - macs
                if extra <= max_recompute / 100 * macs:
                    found.append(Candidate(plan, floor(lifetimes(patched)), extra, len(patched.instrs)))
    return found


def choose(fused: Program, finish: Finish, max_recompute: float = 0.0,
           budget: int | None = None) -> tuple[PatchPlan | None, Program, Plan]:
    """The plan to compile with, and the program and allocation it gives."""
    whole = finish(None)
    if budget is not None and whole[1].size <= budget:
        return (None,) + whole
    found = candidates(fused, max_recompute)
    if budget is None:
        if not found:
            return (None,) + whole
        best = min(found, key=lambda c: (c.floor, c.extra_macs, c.instrs))
        done = finish(best.plan)
        return (best.plan,) + done if done[1].size < whole[1].size else (None,) + whole
    smallest = whole[1].size
    fitting = sorted((c for c in found if c.floor <= budget), key=lambda c: (c.extra_macs, c.instrs, c.floor))
    for c in fitting[:TRIES]:
        done = finish(c.plan)
        if done[1].size <= budget:
            return (c.plan,) + done
        smallest = min(smallest, done[1].size)
    if found:
        smallest = min(smallest, finish(min(found, key=lambda c: (c.floor, c.extra_macs)).plan)[1].size)
    raise CglowError(f"--ram-budget {budget}: no plan fits; the smallest arena reachable is {smallest} bytes"
                     + ("" if max_recompute else " without recomputation (--max-recompute allows more)"))
