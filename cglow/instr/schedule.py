"""Instruction scheduling for a smaller arena: reorder the instructions so that fewer arena bytes are
alive at once (branches of an Inception block, the skip connections of a U-Net).

Memory model (the one of `cglow.alloc.arena.lifetimes`): an arena buffer is alive from the first to
the last instruction that touches it, its size rounded up to 16 bytes; the cost of an order is the most
bytes alive at one instruction. After a set S of instructions has run, the buffers alive are those
touched both inside and outside S, so the bytes alive, and the cost of running any x next, depend on S
alone: the best order is a dynamic program over the sets S that are closed under dependencies.

The search runs that program one instruction count at a time (branch and bound: a set whose peak is
already no better than the input order's is dropped), and keeps per layer the sets with the lowest
(peak so far, bytes alive now), as many as a budget of work allows. When no layer had to drop a set
for the budget, the order is optimal (so on every zoo model as lowered); else it is a beam search,
whose narrowest case is the Sethi-Ullman / Glow list scheduler: among the ready instructions, the one
that raises the peak least and then leaves the fewest bytes alive, that is the one that frees memory,
which finishes a branch before the next one starts. The pass keeps the input order unless the new one
is strictly better.

A producer and the copy that is the only use of its result (into a concat slice or a graph output)
run as one unit (see `_units`; "optimal" is among the orders that keep them so).

Dependencies are between memory regions: each view covers an element range of its buffer, and an
instruction stays after an earlier one whose ranges overlap its own when either of the two writes there
(read after write, write after read, write after write). Writers of disjoint slices of one buffer
(a concat) are free to move past each other.
"""
from __future__ import annotations

from dataclasses import replace
from functools import reduce
from operator import or_

from .expr import Input
from .ir import Map, Program, extent, operands, reads
from .liveness import floor, lifetimes

ALIGN = 16
TRANSITIONS = 60_000  # the search's budget over all layers: states times their ready units
MIN_WIDTH = 8


def dependencies(prog: Program) -> list[int]:
    """For each instruction, the bit mask of the earlier instructions it must stay after."""
    accesses: dict[int, list[tuple[int, int, int, bool]]] = {}  # buffer -> (instr, low, high, writes)
    for i, instr in enumerate(prog.instrs):
        for v, writes in [(instr.out, True)] + [(v, role == "scratch") for role, v in operands(instr)[1:]]:
            if v.size:
                accesses.setdefault(v.buf, []).append((i, *extent(v, instr), writes))
    preds = [0] * len(prog.instrs)
    for found in accesses.values():
        if not any(w for *_, w in found):
            continue
        for n, (j, low, high, w) in enumerate(found):
            for i, lo, hi, w2 in found[:n]:
                if i < j and (w or w2) and lo <= high and low <= hi:
                    preds[j] |= 1 << i
    return preds


def _units(prog: Program, preds: list[int]) -> list[list[int]]:
    """The instructions in runs that the search keeps together: a producer and the copy that moves its
    result elsewhere as the result's only use (forward_copies then makes the producer write there, so
    a copy kept late would hold its destination alive from the producer on all the same)."""
    touching: dict[int, set[int]] = {}
    for i, instr in enumerate(prog.instrs):
        for v in (instr.out,) + reads(instr):
            touching.setdefault(v.buf, set()).add(i)
    copy_of: dict[int, int] = {}  # producer -> copy
    for j, b in enumerate(prog.instrs):
        if isinstance(b, Map) and b.expr == Input(0) and prog.buffer(b.ins[0].buf).kind == "arena":
            others = touching[b.ins[0].buf] - {j}
            i = min(others, default=j)
            if len(others) == 1 and prog.instrs[i].out.buf == b.ins[0].buf != b.out.buf \
                    and all(v.buf != b.ins[0].buf for v in reads(prog.instrs[i])):
                copy_of[i] = j
    units, glued = [], set()
    for i in range(len(prog.instrs)):
        if i in glued:
            continue
        unit = [i]
        # a copy joins when all else it waits for comes before the unit: no cycle can go through the unit
        while unit[-1] in copy_of and preds[copy_of[unit[-1]]] & ~(1 << unit[-1]) < 1 << i:
            unit.append(copy_of[unit[-1]])
            glued.add(unit[-1])
        units.append(unit)
    return units


def _order(prog: Program, preds: list[int], bound: int) -> list[int] | None:
    """The layered dynamic program over dependency-closed sets (a beam search once a layer is full),
    for an order that peaks below `bound` bytes: None if it finds none."""
    n = len(prog.instrs)
    touched: dict[int, int] = {}  # arena buffer -> mask of the instructions touching it
    for i, instr in enumerate(prog.instrs):
        for v in (instr.out,) + reads(instr):
            if prog.buffer(v.buf).kind == "arena":
                touched[v.buf] = touched.get(v.buf, 0) | 1 << i
    # per instruction, (mask of the instructions touching a buffer, the buffer's aligned bytes)
    touches = [[(m, max(1, -(-prog.buffer(b).nbytes // ALIGN)) * ALIGN) for b, m in touched.items() if m >> i & 1]
               for i in range(n)]
    units = _units(prog, preds)
    members = [sum(1 << i for i in u) for u in units]
    needs = [reduce(or_, (preds[i] for i in u)) & ~m for u, m in zip(units, members)]  # what a unit waits for
    succs = [[v for v in range(len(units)) if needs[v] & m] for m in members]
    per_layer = max(MIN_WIDTH, TRANSITIONS // max(1, len(units)))
    # a state: done mask -> (peak, alive bytes, mask of the ready units, previous done mask, last unit)
    layer = {0: (0, 0, sum(1 << u for u in range(len(units)) if not needs[u]), 0, -1)}
    layers = []
    for _ in units:
        following: dict[int, tuple[int, int, int, int, int]] = {}
        for done, (peak, alive, ready, _, _) in layer.items():
            rest = ready
            while rest:
                u = (rest & -rest).bit_length() - 1
                rest &= rest - 1
                after, high, now = done, peak, alive
                for x in units[u]:
                    step = now + sum(size for m, size in touches[x] if not m & after)
                    after |= 1 << x
                    now = step - sum(size for m, size in touches[x] if not m & ~after)
                    high = max(high, step)
                if high < bound and (after not in following or (high, now) < following[after][:2]):
                    now_ready = ready & ~(1 << u)
                    for v in succs[u]:
                        if needs[v] & ~after == 0:
                            now_ready |= 1 << v
                    following[after] = (high, now, now_ready, done, u)
        layers.append(following)
        layer, work = {}, 0  # the best states, as many as the budget of transitions allows
        for done, state in sorted(following.items(), key=lambda kv: kv[1][:2]):
            work += state[2].bit_count()
            if len(layer) >= MIN_WIDTH and work > per_layer:
                break
            layer[done] = state
    picked, done = [], (1 << n) - 1
    if done not in layer:
        return None
    for following in reversed(layers):
        *_, done, u = following[done]
        picked.append(u)
    return [i for u in reversed(picked) for i in units[u]]


def schedule(prog: Program) -> Program:
    """prog with its instructions in an order that needs no more arena bytes (see the module doc)."""
    order = _order(prog, dependencies(prog), floor(lifetimes(prog, ALIGN)))
    return prog if order is None else replace(prog, instrs=tuple(prog.instrs[i] for i in order))
