"""Buffer liveness in an instruction list: each arena buffer's span of instructions, the bytes it takes, and
the most bytes alive at once (the floor no placement beats). The scheduler, the in-place passes and the
allocator (cglow/alloc) all read them."""
from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate

from .ir import Program, reads


@dataclass(frozen=True)
class Interval:
    buf: int
    size: int        # bytes, rounded up to the alignment
    first: int       # first instruction that touches the buffer
    last: int        # last instruction that touches it


def lifetimes(prog: Program, align: int = 16, io: bool = False) -> list[Interval]:
    """Each arena buffer's span, from the first to the last instruction that touches it. With io, the graph
    inputs and outputs are arena buffers too: an input alive from the start (the caller fills it before the
    run), an output until the end (the caller reads it after)."""
    kinds = ("arena", "input", "output") if io else ("arena",)
    span: dict[int, list[int]] = {b: [0, 0] for b in prog.inputs} if io else {}
    for i, instr in enumerate(prog.instrs):
        for v in (instr.out,) + reads(instr):
            if prog.buffer(v.buf).kind in kinds:
                span.setdefault(v.buf, [i, i])[1] = i
    if io:
        for b in prog.outputs:
            span.setdefault(b, [len(prog.instrs) - 1, 0])[1] = max(len(prog.instrs) - 1, 0)
    return [Interval(b, slot(prog.buffer(b).nbytes, align), f, l) for b, (f, l) in sorted(span.items())]


def slot(nbytes: int, align: int = 16) -> int:
    """The arena bytes a buffer of nbytes takes: whole multiples of align, and one for an empty buffer, so
    that its (never dereferenced) pointer aliases no other."""
    return max(1, -(-nbytes // align)) * align


def alive(intervals, steps: int = 0) -> list[int]:
    """The bytes alive at each instruction, over at least `steps` instructions (intervals: anything with first,
    last and size, as Interval)."""
    change = [0] * (max([steps - 1] + [v.last for v in intervals]) + 2)
    for v in intervals:
        change[v.first] += v.size
        change[v.last + 1] -= v.size
    return list(accumulate(change))[:-1]


def floor(intervals: list[Interval]) -> int:
    """The most bytes alive at one time: no placement can do better."""
    return max(alive(intervals), default=0)
