"""Differential fuzzing, NNSmith-style: random valid graphs of the supported ops (tests/fuzz/graphs.py)
compiled by cglow, their C built and run under AddressSanitizer and UBSan, and with one gcc and one clang level of
the compiler matrix (the gcc one bit for bit the same as the sanitized build), against onnxruntime on random
inputs. GRAPHS graphs of the fixed seed and GRAPHS of the rotating one each run, in BATCHES that the test
workers share. CGLOW_FUZZ_SEED=N replays a rotating seed; a failure names its graph and saves the model."""
from __future__ import annotations

import pytest

from tests.fuzz.differential import check_graph, failed_graphs, reference_case, settings
from tests.fuzz.seeds import seed

GRAPHS = 200  # per seed: 400 a run
BATCHES = 8


@pytest.mark.parametrize("batch", range(BATCHES))
@pytest.mark.parametrize("kind", ["fixed", "rotating"])
def test_random_graphs_match_onnxruntime(kind, batch, tmp_path):
    chosen = seed(kind)
    print(f"{kind} seed {chosen}: replay with CGLOW_FUZZ_SEED={chosen}")
    failures = failed_graphs(chosen, range(batch, GRAPHS, BATCHES),
                             lambda index: check_graph(*reference_case(chosen, index), settings(index)),
                             lambda index: reference_case(chosen, index)[0], tmp_path, "graph")
    assert not failures, "\n".join(failures) + "\none alone: python -c 'from tests.fuzz.differential import *; " \
                                                "print(check_graph(*reference_case(SEED, INDEX), settings(INDEX)))'"
