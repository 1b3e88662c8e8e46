"""Differential fuzzing of the float types that cglow stores and computes in float32 (float16, bfloat16, float64):
the random graphs of test_fuzz_graphs.py in each type (tests/fuzz/typed.py), compiled by cglow, their C built and run
under AddressSanitizer and UBSan and with one gcc and one clang level of the compiler matrix, against onnxruntime on
the typed graph, or where it has no kernels for the type, on the graph computed in float32 and rounded after each
op (typed.py), within the type's tolerance (typed.TOLERANCES). GRAPHS graphs of the fixed seed and GRAPHS of the
rotating one per type, in BATCHES that the test workers share. CGLOW_FUZZ_SEED=N replays a rotating seed; a failure
names its graph and saves the model."""
from __future__ import annotations

import pytest

from tests.fuzz.differential import check_typed, failed_graphs, reference_case
from tests.fuzz.seeds import seed
from tests.fuzz.typed import TYPES, typed_case, typed_reference

GRAPHS = 16  # per seed and type: 96 a run
BATCHES = 2


@pytest.mark.parametrize("batch", range(BATCHES))
@pytest.mark.parametrize("kind", ["fixed", "rotating"])
@pytest.mark.parametrize("type_name", list(TYPES))
def test_random_typed_graphs_match_onnxruntime(type_name, kind, batch, tmp_path):
    chosen = seed(kind)
    print(f"{kind} seed {chosen}: replay with CGLOW_FUZZ_SEED={chosen}")
    failures = failed_graphs(chosen, range(batch, GRAPHS, BATCHES), lambda index: check_typed(type_name, chosen, index),
                             lambda index: reference_case(chosen, index, typed_case(type_name), typed_reference)[0],
                             tmp_path, type_name)
    assert not failures, "\n".join(failures) + "\none alone: python -c 'from tests.fuzz.differential import *; " \
                                                f"print(check_typed(\"{type_name}\", SEED, INDEX))'"
