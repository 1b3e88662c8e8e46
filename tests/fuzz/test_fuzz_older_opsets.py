"""Differential fuzzing of the ops that onnxruntime 1.32 runs at older opsets only (RoiAlign: no kernel from opset
22 on), which the random graphs at opset 23 (test_fuzz_graphs.py) leave out: graphs of them and elementwise nodes
at opset 21, GRAPHS of the fixed seed and GRAPHS of the rotating one, each checked as test_fuzz_graphs.py checks
its graphs."""
from __future__ import annotations

import pytest

from tests.fuzz import elementwise, vision
from tests.fuzz.differential import check_graph, failed_graphs, reference_case, settings
from tests.fuzz.graphs import random_graph
from tests.fuzz.seeds import seed

OPSET = 21
GRAPHS = 24  # a third to half of them with RoiAlign (the others start from a value of another rank)


def older_graph(seed: int, index: int, attempt: int = 0):
    return random_graph(seed, index, attempt, elementwise.GENERATORS + [(g, 8 * w) for g, w in vision.OLDER_GENERATORS],
                        OPSET)


@pytest.mark.parametrize("kind", ["fixed", "rotating"])
def test_older_opset_graphs_match_onnxruntime(kind, tmp_path):
    chosen = seed(kind)
    print(f"{kind} seed {chosen}: replay with CGLOW_FUZZ_SEED={chosen}")
    failures = failed_graphs(chosen, range(GRAPHS),
                             lambda index: check_graph(*reference_case(chosen, index, older_graph), settings(index)),
                             lambda index: reference_case(chosen, index, older_graph)[0], tmp_path, "older")
    assert not failures, "\n".join(failures)
