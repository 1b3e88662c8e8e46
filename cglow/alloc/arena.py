"""Static arena allocation: buffer lifetimes become offsets in one arena, with a verifier.

The allocator takes only (buffer, size, lifetime) and returns offsets: greedy placement (each buffer where
it overlaps no buffer alive at the same time) under several orderings, and lowest-first placement (of the
buffers left, the one that fits lowest, under several tie-breaks), the smallest arena kept. The state
kept between runs (buffers of kind "state") comes first, at the arena's start, where nothing else goes.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

from ..instr.ir import Program, extent, reads
from ..instr.liveness import Interval, alive, floor, lifetimes, slot


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
    lambda v, peak: (-v.size, v.first, v.buf),                    # largest first
    lambda v, peak: (v.first - v.last, -v.size, v.buf),           # longest-lived first
    lambda v, peak: (v.first, -v.size, v.buf),                    # in order of first use
    lambda v, peak: (-peak, -v.size, v.first, v.buf),             # alive at the busiest times first
)
TIES = (  # among the buffers that fit lowest, which goes first (for _lowest_first)
    lambda v, peak: (-v.size * (v.last - v.first + 1), v.buf),    # the most bytes times instructions
    lambda v, peak: (v.first - v.last, -v.size, v.buf),           # the longest-lived
    lambda v, peak: (v.first, -v.size, v.buf),                    # the first used
    lambda v, peak: (-peak, -v.size * (v.last - v.first + 1), v.buf),
)


def _conflicts(intervals: list[Interval]) -> list[list[int]]:
    """For each interval (by index), the indices of those alive at the same time."""
    near: list[list[int]] = [[] for _ in intervals]
    alive: list[int] = []
    for i in sorted(range(len(intervals)), key=lambda i: intervals[i].first):
        alive = [j for j in alive if intervals[j].last >= intervals[i].first]
        for j in alive:
            near[i].append(j)
            near[j].append(i)
        alive.append(i)
    return near


def _peaks(intervals: list[Interval]) -> list[int]:
    """For each interval, the most bytes alive at once during its life."""
    live = alive(intervals)
    return [max(live[v.first:v.last + 1]) for v in intervals]


def _fit(intervals: list[Interval], near: list[int], offsets: list, size: int, best_fit: bool) -> int:
    """The lowest free offset of `size` bytes among the placed `near` (or the tightest gap, for best fit)."""
    busy = sorted((offsets[j], offsets[j] + intervals[j].size) for j in near if offsets[j] is not None)
    gaps, offset = [], 0
    for start, end in busy:
        if start - offset >= size:
            if not best_fit:
                return offset
            gaps.append((start - offset, offset))
        offset = max(offset, end)
    return min(gaps)[1] if gaps else offset


def _place(intervals: list[Interval], near: list[list[int]], order: list[int], best_fit: bool) -> list:
    """Each buffer, in `order`, at the lowest free offset (or the tightest gap, for best fit) among the buffers
    already placed that are alive at the same time."""
    offsets: list = [None] * len(intervals)
    for i in order:
        offsets[i] = _fit(intervals, near[i], offsets, intervals[i].size, best_fit)
    return offsets


def _lowest_first(intervals: list[Interval], near: list[list[int]], rank: list) -> list:
    """Buffers placed one by one, each time the one that fits lowest (first fit) among those left, ties by
    `rank`: the arena fills from the bottom up, like a skyline, so small short-lived buffers fill the holes
    between the big ones instead of being stacked above them."""
    offsets: list = [None] * len(intervals)
    lowest = [0] * len(intervals)
    heap = [(0, rank[i], i) for i in range(len(intervals))]
    heapq.heapify(heap)
    while heap:
        offset, _, i = heapq.heappop(heap)
        if offsets[i] is not None or offset != lowest[i]:
            continue  # placed already, or an outdated entry
        offsets[i] = offset
        for j in near[i]:
            if offsets[j] is None:
                fit = _fit(intervals, near[j], offsets, intervals[j].size, False)
                if fit != lowest[j]:
                    lowest[j] = fit
                    heapq.heappush(heap, (fit, rank[j], j))
    return offsets


def _placements(intervals: list[Interval]):
    """Candidate placements (offsets by index), the former greedy orderings first."""
    near, peaks = _conflicts(intervals), _peaks(intervals)
    for key in ORDERINGS:
        order = sorted(range(len(intervals)), key=lambda i: key(intervals[i], peaks[i]))
        for best_fit in (False, True):
            yield _place(intervals, near, order, best_fit)
    for tie in TIES:
        yield _lowest_first(intervals, near, [tie(v, p) for v, p in zip(intervals, peaks)])


def allocate(prog: Program, align: int = 16, io: bool = False) -> Plan:
    """Every buffer starts at a multiple of `align` bytes (at least its element size). Tries several
    placements and keeps the smallest arena, stopping as soon as one reaches the floor."""
    align = max([align] + [b.dtype.itemsize for b in prog.buffers if b.kind in ("arena", "state") or io])
    intervals = lifetimes(prog, align, io)
    lowest = floor(intervals)
    best: Plan | None = None
    for offsets in _placements(intervals):
        size = max((o + v.size for o, v in zip(offsets, intervals)), default=0)
        if best is None or size < best.size:
            best = Plan({v.buf: o for v, o in zip(intervals, offsets)}, size, tuple(intervals), align)
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
