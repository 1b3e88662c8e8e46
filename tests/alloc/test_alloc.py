"""The arena allocator: property test over random lifetimes, plus reuse on a chain."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from cglow.alloc.arena import allocate
from cglow.instr.expr import ACC, Input, lit
from cglow.instr.liveness import floor, lifetimes
from cglow.instr.ir import Buffer, Epilogue, Gemm, Map, Program, View, operands, reads


def chain_program(spans: list[tuple[int, int, int]]) -> Program:
    """Arena buffers (size, first, last) touched by one map per step, each writing a 1-element output."""
    steps = max(last for _, _, last in spans) + 1
    buffers = [Buffer(i, "arena", size, f"b{i}") for i, (size, _, _) in enumerate(spans)]
    out = Buffer(len(buffers), "output", steps, "y")
    instrs = []
    for t in range(steps):
        live = [View.of(b.id, (1,)) for b, (_, f, l) in zip(buffers, spans) if t in (f, l)]
        instrs.append(Map(View.of(out.id, (1,), offset=t), tuple(live), lit(0.0, "float32"), "t"))
    return Program("p", tuple(buffers) + (out,), tuple(instrs), (), (out.id,))


spans = st.lists(st.tuples(st.integers(1, 64), st.integers(0, 9), st.integers(0, 9)).map(
    lambda s: (s[0], min(s[1], s[2]), max(s[1], s[2]))), min_size=1, max_size=25)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(spans)
def test_live_buffers_never_overlap(spec):
    prog = chain_program(spec)
    plan = allocate(prog)  # allocate runs the verifier; check the property here too
    ivs = lifetimes(prog)
    for i, a in enumerate(ivs):
        for b in ivs[i + 1:]:
            if a.first <= b.last and b.first <= a.last:
                ao, bo = plan.offsets[a.buf], plan.offsets[b.buf]
                assert ao + a.size <= bo or bo + b.size <= ao
    peak = max(sum(v.size for v in ivs if v.first <= t <= v.last) for t in range(10))
    assert floor(ivs) == peak
    assert peak <= plan.size <= sum(v.size for v in ivs)


def test_disjoint_lifetimes_share_memory():
    plan = allocate(chain_program([(16, 0, 1), (16, 1, 2), (16, 2, 3), (16, 3, 4)]))
    assert plan.size == 2 * 16 * 4  # two float buffers of 16 alive at a time


def test_operand_roles_give_reads_in_the_kernels_order():
    """Each primitive declares its views' roles (instr/ir.py, its `roles`): reads() is every operand but the output,
    the epilogue's inputs and the scratch panel included, in the order the kernel takes them."""
    a, b, bias, out, panel = (View.of(i, (2, 2)) for i in range(5))
    gemm = Gemm(out, a, b, Epilogue(ACC + Input(0), (bias,)), "g", panel=panel)
    assert operands(gemm) == (("out", out), ("in", a), ("in", b), ("in", bias), ("scratch", panel))
    assert reads(gemm) == (a, b, bias, panel)
    assert reads(Map(out, (a, b), Input(0) + Input(1), "m")) == (a, b)


def test_lowest_first_reaches_the_floor_where_greedy_orderings_do_not():
    """Every greedy ordering (largest, longest-lived, first used, busiest first; first or best fit) stacks one
    of these four buffers above the others (448 bytes or more); placing, each time, the buffer that fits
    lowest packs them in the 384 bytes alive at the busiest instruction."""
    prog = chain_program([(48, 5, 6), (64, 1, 1), (32, 3, 6), (32, 0, 4)])
    assert floor(lifetimes(prog)) == 384
    assert allocate(prog).size == 384
