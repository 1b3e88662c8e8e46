"""Patch-based execution (cglow/instr/patches.py, the planner alloc/patch_plan.py): a span run in tiles computes
what the whole-tensor plan computes (int8 to the bit, float to rounding), in less arena, within the extra-MAC
bound the user allows; --ram-budget finds a plan that fits or says in one line what is reachable."""
from __future__ import annotations

import re

import numpy as np
import onnx
import pytest

import cglow
from cglow import zoo
from cglow.alloc.patch_plan import CALL_CYCLES, MAC_CYCLES, OVERHEAD, Candidate, candidates, summary
from cglow.compiler import import_graph
from cglow.errors import CglowError
from cglow.graph import passes as graph_passes
from cglow.instr.liveness import floor, lifetimes
from cglow.instr.passes import FUSING
from cglow.instr.patches import PatchPlan, Spans, patch, tiles_of
from cglow.kernels.code_size import flash_bytes
from cglow.lower.program import lower
from cglow.options import Options
from cglow.tiles import TILES
from cglow.tools.macs import macs
from cglow.tools.reference import ort_quantized

from tests.mobile_block import int8, mobile_block
from tests.util import cglow_cmd, save

WHOLE = Options(ram_budget=1 << 40)  # every plan fits: the whole-tensor plan, the fastest


def fused(model: onnx.ModelProto):
    graph = import_graph(model)
    for rewrite in graph_passes.PIPELINE:
        graph = rewrite(graph)
    prog = lower(graph)
    for rewrite in FUSING:
        prog = rewrite(prog)
    return prog


def run(model: onnx.ModelProto, options: Options, x: np.ndarray) -> tuple[cglow.CompiledModel, np.ndarray]:
    compiled = cglow.compile_model(model, options=options)
    return compiled, cglow.build(compiled)(x.astype(compiled.inputs[0].dtype))[0]


@pytest.fixture(scope="module", params=["float", "int8"])
def model(request):
    return mobile_block() if request.param == "float" else int8(mobile_block())


def test_every_span_qualifies_from_the_stem():
    spans = Spans(fused(mobile_block())).all()
    assert spans[0][0] == 0 and max(last for _, last in spans) >= 7  # through the block, the skip and the pools


@pytest.mark.parametrize("recompute", [False, True], ids=["streamed", "patches"])
@pytest.mark.parametrize("tiles", [2, 7, 20])
def test_tiles_compute_what_whole_tensors_do(model, tiles, recompute, monkeypatch):
    """Every fourth qualifying span, in tiles, gives the whole-tensor plan's outputs: int8 to the bit, float within
    rounding (tiles of other shapes may take other kernel variants, a global pool sums its rows in tiles)."""
    x = np.random.default_rng(tiles).standard_normal((1, 3, 40, 36)).astype(np.float32)
    if model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.INT8:
        x = np.random.default_rng(tiles).integers(-128, 128, (1, 3, 40, 36))
    _, want = run(model, WHOLE, x)
    count = len(Spans(fused(mobile_block())).all())
    for k in range(0, count, 4):
        def forced(fused, finish, *_):  # the k-th span of the program as compile_program fuses it
            first, last = Spans(fused).all()[k]
            plan = PatchPlan(first, last, tiles, recompute)
            patched = patch(fused, plan)
            chosen = Candidate(plan, floor(lifetimes(patched)), macs(patched) - macs(fused), len(patched.instrs))
            return summary(fused, chosen, finish(None), finish(plan)[0])
        monkeypatch.setattr("cglow.compiler.choose", forced)
        compiled, got = run(model, Options(), x)
        assert compiled.patches.plan.tiles == tiles
        if got.dtype == np.int8:
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_streamed_rows_compute_nothing_twice():
    prog = fused(mobile_block())
    macs = sum(i.macs() for i in prog.instrs)
    for first, last in Spans(prog).all():
        for tiles in (2, 5, 20):
            streamed = patch(prog, PatchPlan(first, last, tiles, False))
            assert sum(i.macs() for i in streamed.instrs) == macs
    recomputed = patch(prog, PatchPlan(0, 7, 5, True))
    assert sum(i.macs() for i in recomputed.instrs) > macs  # halos of 3x3 and 5x5 windows, computed again


def test_halo_and_tile_rows():
    prog = fused(mobile_block())
    last = max(last for _, last in Spans(prog).all())
    height, rows, halo = tiles_of(prog, PatchPlan(0, last, 4, False))
    assert (height, rows) == (10, 3) and halo >= 2  # the 5x5 depthwise keeps 4 rows; the pools' 3x3, 2


@pytest.mark.parametrize("name", ["vww", "resnet8"])
def test_the_default_plan_lowers_the_arena_without_recomputing(name):
    model = zoo.build(name)
    whole = cglow.compile_model(model, options=WHOLE)
    compiled = cglow.compile_model(model)
    assert whole.patches is None and compiled.patches is not None
    assert compiled.arena_bytes < whole.arena_bytes * 0.6 and compiled.patches.whole_arena == whole.arena_bytes
    assert not compiled.patches.plan.recompute and compiled.patches.extra_macs == 0
    added = len(compiled.program.instrs) - len(whole.program.instrs)  # kernel calls, each worth CALL_CYCLES
    assert added * CALL_CYCLES <= OVERHEAD * MAC_CYCLES * macs(whole.program)
    flash = flash_bytes(compiled.program, TILES["generic"]) - flash_bytes(whole.program, TILES["generic"])
    assert compiled.patches.flash_added == flash > 0 and f"{flash} bytes" in compiled.patches.lines()[-1]
    weights = compiled.program.weights()  # the tiles share them: each stored once
    assert len({(b.dtype.str, b.data.tobytes()) for b in weights}) == len(weights)


def test_kws_in_tiles_fits_6_kib():
    """kws quantized by onnxruntime (the issue's case): the default plan takes tiles below 6 KiB with no MAC done
    twice; a budget with room for whole tensors keeps them, the fastest plan."""
    model = ort_quantized(zoo.build("kws"))
    compiled = cglow.compile_model(model, options=Options(align=4))
    assert compiled.arena_bytes <= 6144 < compiled.patches.whole_arena and compiled.patches.extra_macs == 0
    assert cglow.compile_model(model, options=Options(align=4, ram_budget=1 << 20)).patches is None


def test_a_small_model_takes_only_cheap_tiles():
    """Few MACs pay for few kernel calls: the default takes at most a plan of a few tiles."""
    whole = cglow.compile_model(mobile_block(), options=WHOLE)
    compiled = cglow.compile_model(mobile_block())
    added = len(compiled.program.instrs) - len(whole.program.instrs)
    assert added * CALL_CYCLES <= OVERHEAD * MAC_CYCLES * macs(whole.program)
    assert compiled.patches is None or compiled.patches.plan.tiles <= 3


def test_max_recompute_bounds_the_extra_macs():
    prog = fused(mobile_block())
    macs = sum(i.macs() for i in prog.instrs)
    assert all(not c.plan.recompute for c in candidates(prog, 0))
    found = candidates(prog, 10)
    assert any(c.plan.recompute for c in found) and all(c.extra_macs <= macs / 10 for c in found)


def test_ram_budget_takes_the_fastest_plan_that_fits(model):
    whole = cglow.compile_model(model, options=WHOLE).arena_bytes
    assert cglow.compile_model(model, options=Options(ram_budget=whole)).patches is None
    fits = cglow.compile_model(model, options=Options(ram_budget=whole - 1))
    assert fits.arena_bytes < whole and fits.patches is not None
    with pytest.raises(CglowError, match=r"--ram-budget 64: no plan fits; the smallest arena reachable is \d+ ") as e:
        cglow.compile_model(model, options=Options(ram_budget=64))
    least = int(re.search(r"reachable is (\d+)", str(e.value)).group(1))
    assert cglow.compile_model(model, options=Options(ram_budget=least)).arena_bytes <= least <= fits.arena_bytes


def test_ram_budget_error_is_one_line(tmp_path):
    path = save(mobile_block(), tmp_path / "m.onnx")
    result = cglow_cmd("emit", str(path), "-o", str(tmp_path / "m.c"), "--ram-budget", "1K")
    assert result.returncode == 2 and not (tmp_path / "m.c").exists()
    assert result.stderr.count("\n") == 1 and "the smallest arena reachable is" in result.stderr


def test_info_shows_the_plan(tmp_path):
    result = cglow_cmd("info", str(save(mobile_block(), tmp_path / "m.onnx")), "--ram-budget", "40K")
    lines = result.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("patches: "))
    assert lines[at].startswith("patches: streamed rows (halo rows kept) over ") and "from 'stem'" in lines[at]
    assert lines[at + 2] == "  extra MACs: 0 (0.0%)" and lines[at + 3].startswith("  arena without patches: ")
