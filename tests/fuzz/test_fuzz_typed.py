"""Differential fuzzing of the float types that cglow stores and computes in float32 (float16, bfloat16, float64):
the random graphs of test_fuzz_graphs.py in each type (tests/fuzz/typed.py), compiled by cglow, their C built and run
under AddressSanitizer and UBSan and with one gcc and one clang level of the compiler matrix, against onnxruntime on
the typed graph, or where it has no kernels for the type, on the graph computed in float32 and rounded after each
op (typed.py), within the type's tolerance (typed.TOLERANCES). GRAPHS graphs of the fixed seed and GRAPHS of the
rotating one per type, in BATCHES that the test workers share; and HALF_GRAPHS float16 ones compiled with
`--half-math native` for the Cortex-M55, run under QEMU. CGLOW_FUZZ_SEED=N replays a rotating seed; a failure names
its graph and saves the model."""
from __future__ import annotations

import pytest

import cglow
from cglow.options import Options
from cglow.tools import cross
from tests.fuzz.differential import check_typed, difference, failed_graphs, typed_reference_case, typed_tolerance
from tests.fuzz.seeds import FIXED_SEED, seed
from tests.fuzz.typed import TYPES
from tests.util import need_target

GRAPHS = 16  # per seed and type: 96 a run
BATCHES = 2
HALF_GRAPHS = 12  # float16 ones of the fixed seed in native half arithmetic: a Cortex-M55 image each, about 1 s


@pytest.mark.parametrize("batch", range(BATCHES))
@pytest.mark.parametrize("kind", ["fixed", "rotating"])
@pytest.mark.parametrize("type_name", list(TYPES))
def test_random_typed_graphs_match_onnxruntime(type_name, kind, batch, tmp_path):
    chosen = seed(kind)
    print(f"{kind} seed {chosen}: replay with CGLOW_FUZZ_SEED={chosen}")
    failures = failed_graphs(chosen, range(batch, GRAPHS, BATCHES), lambda index: check_typed(type_name, chosen, index),
                             lambda index: typed_reference_case(type_name, chosen, index)[0],
                             tmp_path, type_name)
    assert not failures, "\n".join(failures) + "\none alone: python -c 'from tests.fuzz.differential import *; " \
                                                f"print(check_typed(\"{type_name}\", SEED, INDEX))'"


def half_problem(index: int) -> str | None:
    """What differs between onnxruntime and float16 graph `index` of the fixed seed compiled with `--half-math native`
    for the Cortex-M55 (its maps computed in _Float16, each op rounded: instr/half_math.py) and run under QEMU."""
    target = need_target("cortex-m55")
    model, feeds, want = typed_reference_case("float16", FIXED_SEED, index)
    compiled = cglow.compile_model(model, options=Options(target="cortex-m55", half_math="native"))
    image = cross.build_image(compiled, [feeds[t.name] for t in compiled.inputs], target)
    got = cross.run_image(image, compiled, target, count=False).outputs
    return "; ".join(f"output {i}: {p}" for i, (g, w) in enumerate(zip(got, want))
                     if (p := difference(g, w, tolerance=typed_tolerance("float16")))) or None


def test_random_float16_graphs_in_native_half_on_cortex_m55(tmp_path):
    failures = failed_graphs(FIXED_SEED, range(HALF_GRAPHS), half_problem,
                             lambda index: typed_reference_case("float16", FIXED_SEED, index)[0],
                             tmp_path, "half")
    assert not failures, "\n".join(failures) + \
        "\none alone: python -c 'from tests.fuzz.test_fuzz_typed import *; print(half_problem(INDEX))'"
