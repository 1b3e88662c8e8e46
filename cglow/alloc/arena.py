"""Static arena allocation: buffer lifetimes become offsets in one arena, with a verifier.

The allocator takes only (buffer, size, lifetime) and returns offsets: greedy placement (each buffer where
it overlaps no buffer alive at the same time) under several orderings, the smallest arena kept. The state
kept between runs (buffers of kind "state") comes first, at the arena's start, where nothing else goes.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..instr.ir import Program, extent, reads
from ..instr.liveness import Interval, floor, lifetimes, slot


@dataclass(frozen=True)
class Plan:
    offsets: dict[int, int]      # buffer id -> byte offset in the arena
    size: int                    # arena bytes
    intervals: tuple[Interval, ...]
    align: int = 16              # every offset is a multiple
    state_bytes: int = 0         # the arena's first bytes, holding the state between runs


def _overlap_in_time(a: Interval, b: Interval) -> bool:
    return a.first <= b.last and b.first <= a.last


ORDERINGS = (
    lambda v: (-v.size, v.first, v.buf),                 # largest first
    lambda v: (v.first - v.last, -v.size, v.buf),        # longest-lived first
    lambda v: (v.first, -v.size, v.buf),                 # in order of first use
)


def _place(intervals: list[Interval], key, best_fit: bool) -> dict[int, int]:
    """Each buffer, in `key` order, at the lowest free offset (or the tightest gap, for best fit) among
    the buffers already placed that are alive at the same time."""
    offsets: dict[int, int] = {}
    placed: list[Interval] = []
    for iv in sorted(intervals, key=key):
        busy = sorted((offsets[p.buf], offsets[p.buf] + p.size) for p in placed if _overlap_in_time(p, iv))
        gaps, offset = [], 0
        for start, end in busy:
            if start - offset >= iv.size:
                gaps.append((start - offset, offset))
            offset = max(offset, end)
        gaps.append((float("inf"), offset))
        offsets[iv.buf] = min(gaps)[1] if best_fit else gaps[0][1]
        placed.append(iv)
    return offsets


def allocate(prog: Program, align: int = 16, io: bool = False) -> Plan:
    """Every buffer starts at a multiple of `align` bytes (at least its element size). Tries several
    orderings and keeps the smallest arena, stopping as soon as one reaches the floor."""
    align = max([align] + [b.dtype.itemsize for b in prog.buffers if b.kind in ("arena", "state") or io])
    intervals = lifetimes(prog, align, io)
    lowest = floor(intervals)
    best: Plan | None = None
    for key in ORDERINGS:
        for best_fit in (False, True):
            offsets = _place(intervals, key, best_fit)
            size = max((offsets[v.buf] + v.size for v in intervals), default=0)
            if best is None or size < best.size:
                best = Plan(offsets, size, tuple(intervals), align)
            if best.size == lowest:
                break
        if best.size == lowest:
            break
    best = _after_states(prog, best)
    verify(prog, best)
    return best


def _after_states(prog: Program, plan: Plan) -> Plan:
    """The plan moved past the state buffers, which come first, alive through every instruction: their values
    outlive the run, and a fixed place lets the caller's arena keep them (docs/c-api.md)."""
    states = [b for b in prog.buffers if b.kind == "state"]
    if not states:
        return plan
    offsets, intervals, start = {}, [], 0
    for b in states:
        offsets[b.id] = start
        intervals.append(Interval(b.id, slot(b.nbytes, plan.align), 0, max(len(prog.instrs) - 1, 0)))
        start += intervals[-1].size
    offsets.update((buf, offset + start) for buf, offset in plan.offsets.items())
    return Plan(offsets, plan.size + start, tuple(intervals) + plan.intervals, plan.align, start)


def verify(prog: Program, plan: Plan) -> None:
    """No two buffers alive at the same time share a byte, and every view stays inside its buffer."""
    ivs = plan.intervals
    for i, a in enumerate(ivs):
        lo, hi = plan.offsets[a.buf], plan.offsets[a.buf] + a.size
        assert 0 <= lo and hi <= plan.size, f"buffer {a.buf} outside the arena"
        for b in ivs[i + 1:]:
            if _overlap_in_time(a, b):
                blo = plan.offsets[b.buf]
                assert hi <= blo or blo + b.size <= lo, f"live buffers {a.buf} and {b.buf} overlap"
    for instr in prog.instrs:
        for v in (instr.out,) + reads(instr):
            low, high = extent(v, instr)
            assert 0 <= low and high < prog.buffer(v.buf).size or v.size == 0, \
                f"a view of buffer {v.buf} reaches outside it"
