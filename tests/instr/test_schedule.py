"""The memory-aware instruction scheduler: valid orders, never a larger peak, the optimum on small
branching programs, and the zoo's branching models still right with it in the pipeline."""
from __future__ import annotations

from collections import deque
from dataclasses import replace
import itertools
import time

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

import cglow
from cglow import zoo
from cglow.instr.liveness import floor, lifetimes
from cglow.graph import passes as graph_passes
from cglow.graph.onnx_import import import_model
from cglow.instr import passes
from cglow.instr.expr import Expr, Input
from cglow.instr.ir import Buffer, Map, Program, View, reads
from cglow.instr.schedule import dependencies, schedule
from cglow.lower.program import lower

from tests.util import ort_run, random_feeds, rel_error

X, Y = Input(0), Input(1)

L = 4  # elements of every value in the hand-built programs


class Builder:
    """A program over values of L floats, each a view (strided, so buffers differ in size)."""

    def __init__(self):
        self.buffers = [Buffer(0, "input", L, "x")]
        self.instrs: list[Map] = []

    def buffer(self, size: int, kind: str = "arena") -> int:
        self.buffers.append(Buffer(len(self.buffers), kind, size, f"t{len(self.buffers)}"))
        return self.buffers[-1].id

    def map(self, out: View, expr: Expr, *ins: View) -> View:
        self.instrs.append(Map(out, ins, expr, f"n{len(self.instrs)}"))
        return out

    def fresh(self, stride: int, expr: Expr, *ins: View) -> View:
        """A new value in a new buffer of L * stride elements."""
        return self.map(View(self.buffer(L * stride), 0, (L,), (stride,)), expr, *ins)

    def program(self, result: View) -> Program:
        self.map(View.of(self.buffer(L, "output"), (L,)), -X, result)
        return Program("p", tuple(self.buffers), tuple(self.instrs), (0,), (len(self.buffers) - 1,))


def ops(kinds=(0, 1, 2, 3, 4), max_size=14):
    return st.lists(st.tuples(st.sampled_from(kinds), st.integers(0, 99), st.integers(0, 99), st.integers(1, 6)),
                    min_size=1, max_size=max_size)


def random_program(ops) -> Program:
    """Maps over earlier values, in-place updates, overwrites of dead buffers (the ping-pong of a
    recurrence), copies, and concats whose slices are written by separate maps."""
    b = Builder()
    values = [View.of(0, (L,))]
    for kind, i, j, n in ops:
        x, y = values[i % len(values)], values[j % len(values)]
        if kind == 1 and b.buffers[x.buf].kind == "arena":  # in place
            values.append(b.map(x, X * 0.5 + Y, x, y))
        elif kind == 2:  # concat of n + 1 slices, read back through a strided view over all of them
            c = b.buffer(L * (n + 1))
            for k in range(n + 1):
                b.map(View(c, L * k, (L,), (1,)), X + k, values[(i + k) % len(values)])
            values.append(View(c, 0, (L,), (n + 1,)))
        elif kind == 3:
            values.append(b.fresh(n, X, x))
        elif kind == 4 and b.buffers[x.buf].kind == "arena":  # over a buffer others may still read
            values.append(b.map(x, X - 1.0, y))
        else:
            values.append(b.fresh(n, X + Y, x, y))
    return b.program(values[-1])


def elements(v: View) -> set[int]:
    index = np.array(v.offset)
    for d, s in zip(v.shape, v.strides):
        index = np.add.outer(index, np.arange(d) * s)
    return set(index.ravel().tolist())


def assert_valid(prog: Program, ordered: Program) -> None:
    """A permutation keeping the order of every two instructions that share an element one writes."""
    assert sorted(map(id, ordered.instrs)) == sorted(map(id, prog.instrs))
    position = {id(instr): k for k, instr in enumerate(ordered.instrs)}
    touched = [[(v.buf, elements(v), w) for v, w in [(x.out, True)] + [(v, False) for v in reads(x)]]
               for x in prog.instrs]
    for (i, a), (j, b) in itertools.combinations(enumerate(prog.instrs), 2):
        if any(p == q and (w or u) and e & f for p, e, w in touched[i] for q, f, u in touched[j]):
            assert position[id(a)] < position[id(b)], (i, j)


def copies_of_single_use_values(prog: Program) -> list[tuple[str, str]]:
    """(producer, copy) for each copy of an arena value that nothing else touches."""
    pairs = []
    for c in prog.instrs:
        t = c.ins[0].buf
        if c.expr == X and prog.buffer(t).kind == "arena":
            touching = [x for x in prog.instrs if t in {v.buf for v in (x.out,) + reads(x)}]
            if len(touching) == 2 and touching[0].out.buf == t:
                pairs.append((touching[0].node, c.node))
    return pairs


def peak(prog: Program) -> int:
    return floor(lifetimes(prog))


def valid_orders(prog: Program):
    """prog in every order that keeps the dependencies, by enumeration."""
    preds = dependencies(prog)
    for order in itertools.permutations(range(len(prog.instrs))):
        done = 0
        for i in order:
            if preds[i] & ~done:
                break
            done |= 1 << i
        else:
            yield replace(prog, instrs=tuple(prog.instrs[i] for i in order))


@settings(derandomize=True, max_examples=150, deadline=None)
@given(ops())
def test_schedule_is_valid_and_never_raises_the_peak(ops):
    prog = random_program(ops)
    ordered = schedule(prog)
    assert_valid(prog, ordered)
    assert peak(ordered) <= peak(prog)
    assert schedule(prog) == ordered  # deterministic
    if ordered != prog:  # forward_copies will make the producer write where the copy does: kept together
        nodes = [i.node for i in ordered.instrs]
        assert all(nodes.index(c) == nodes.index(p) + 1 for p, c in copies_of_single_use_values(prog))


@settings(derandomize=True, max_examples=100, deadline=None)
@given(ops(kinds=(0, 1, 2, 4), max_size=6))  # no copies: the search keeps them by their producer
def test_exact_search_finds_the_optimum_of_small_programs_from_their_worst_order(ops):
    prog = random_program(ops)
    assume(len(prog.instrs) <= 7)
    orders = list(valid_orders(prog))
    assert peak(schedule(max(orders, key=peak))) == min(map(peak, orders))


def test_the_branch_that_frees_more_runs_first():
    """Branch A peaks at 140 floats and leaves 40, branch B peaks at 44 and leaves 32. The input order
    runs B first (32 held while A peaks: 172 floats); A first holds 40 while B peaks: 140."""
    b = Builder()
    x = View.of(0, (L,))
    small = b.fresh(8, X * 2.0, b.fresh(3, X + 1.0, x))
    big = b.fresh(10, X * 3.0, b.fresh(25, X - 1.0, x))
    prog = b.program(b.fresh(1, X + Y, big, small))
    assert (peak(prog), min(map(peak, valid_orders(prog)))) == (172 * 4, 140 * 4)
    ordered = schedule(prog)
    assert peak(ordered) == 140 * 4
    assert [i.node for i in ordered.instrs] == ["n2", "n3", "n0", "n1", "n4", "n5"]


def test_inception_block_writing_concat_slices():
    """Four branches from a stem, each ending in its own slice of one concat buffer, in the order of the
    lowered Inception block (every branch's first step, then the slice writers): the slice writers move
    past each other, and the search finds the best order."""
    b = Builder()
    stem = b.fresh(8, X + 1.0, View.of(0, (L,)))
    concat = b.buffer(16 * L)
    branches = [stem] + [b.fresh(n, X - float(n), stem) for n in (2, 1, 8)]
    for k, v in enumerate(branches):
        b.map(View(concat, 4 * L * k, (L,), (4,)), X * float(k + 1), v)
    prog = b.program(View(concat, 0, (L,), (16,)))
    ordered = schedule(prog)
    assert_valid(prog, ordered)
    assert peak(ordered) == min(map(peak, valid_orders(prog))) < peak(prog)


def breadth_first(prog: Program) -> Program:
    """The same program in another valid order: every instruction as soon as it is ready, first come
    first served (the order that starts every branch of an Inception block before finishing one)."""
    preds = dependencies(prog)
    n = len(prog.instrs)
    queue, done, order = deque(i for i in range(n) if not preds[i]), 0, []
    while queue:
        i = queue.popleft()
        order.append(i)
        done |= 1 << i
        queue.extend(j for j in range(n) if preds[j] >> i & 1 and not preds[j] & ~done)
    return replace(prog, instrs=tuple(prog.instrs[i] for i in order))


def with_schedule(*before):
    """The instruction pipeline with the scheduler after the fusions, before the copy passes."""
    pipeline = tuple(p for p in passes.PIPELINE if p is not schedule)
    at = pipeline.index(passes.fuse_epilogues) + 1
    return pipeline[:at] + before + (schedule,) + pipeline[at:]


def fused(name: str) -> Program:
    """A zoo model's program as the scheduler gets it."""
    graph = import_model(zoo.build(name))
    for rewrite in graph_passes.PIPELINE:
        graph = rewrite(graph)
    prog = lower(graph)
    for rewrite in passes.PIPELINE[:passes.PIPELINE.index(passes.fuse_epilogues) + 1]:
        prog = rewrite(prog)
    return prog


@pytest.mark.parametrize("name", ["inception", "unet", "resnet8", "lstm_kws", "mobilenetv2"])
def test_zoo_floor_before_and_after(name):
    """From the lowered order and from the breadth-first one, the same floor (the optimum, where the
    search is exact), never above the input's."""
    results = []
    for prog in (fused(name), breadth_first(fused(name))):
        start = time.perf_counter()
        ordered = schedule(prog)
        seconds = time.perf_counter() - start
        print(f"{name}: {len(prog.instrs)} instructions, floor {peak(prog)} -> {peak(ordered)} bytes, {seconds:.3f} s")
        assert peak(ordered) <= peak(prog)
        results.append(peak(ordered))
    assert results[0] == results[1]


@pytest.mark.parametrize("name", ["inception", "unet", "resnet8", "lstm_kws"])
def test_zoo_model_scheduled_from_breadth_first_matches_onnxruntime(name, monkeypatch):
    """From a bad (breadth-first) order, scheduling never leaves a larger final arena than not scheduling,
    and the numbers still match."""
    model = zoo.build(name)
    unscheduled = tuple(p for p in with_schedule(breadth_first) if p is not schedule)
    monkeypatch.setattr(passes, "PIPELINE", unscheduled)
    before = cglow.compile_model(model)
    monkeypatch.setattr(passes, "PIPELINE", with_schedule(breadth_first))
    c = cglow.compile_model(model)
    assert c.arena_bytes <= before.arena_bytes
    feeds = random_feeds(model, seed=1)
    got = cglow.build(c)(*(feeds[t.name] for t in c.inputs))
    for g, w in zip(got, ort_run(model, feeds)):
        assert rel_error(g, w) <= 1e-4
