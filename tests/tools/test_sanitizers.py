"""The generated C of the test models built with gcc -fsanitize=address,undefined -fno-sanitize-recover=all
and run clean (tests/sanitized.py), its outputs checked: the zoo models against onnxruntime, and one ONNX
conformance case per supported op against the case's expected outputs. The random graphs of
test_fuzz_graphs.py run sanitized too.

Left out: mobilenetv2 (55 MB of C: a sanitized build takes minutes) and lstm_kws (1 089 unrolled kernels,
10 s to build sanitized; gru_kws goes through the same recurrent lowering)."""
from __future__ import annotations

import numpy as np
from onnx.backend.test.runner import Runner
import pytest

import cglow
from cglow import zoo
from cglow.tools import backend
from cglow.tools.coverage import as_array

from tests.conformance_cases import all_cases, expected_failures, op_of, run_cases
from tests.sanitized import run_sanitized
from tests.util import ort_run, random_feeds, rel_error

ZOO = sorted(set(zoo.MODELS) - {"mobilenetv2", "lstm_kws"})


@pytest.mark.parametrize("name", ZOO)
def test_zoo_model_runs_clean_under_sanitizers(name):
    model = zoo.build(name)
    feeds = random_feeds(model, seed=1)
    compiled = cglow.compile_model(model)
    got = run_sanitized(compiled, [feeds[t.name] for t in compiled.inputs])
    for g, want in zip(got, ort_run(model, feeds), strict=True):
        assert rel_error(g, want) <= 1e-4


def one_case_per_op() -> list[str]:
    """The first conformance case (by name) of each op that passes."""
    chosen: dict[str, str] = {}
    for name in run_cases():
        if name not in expected_failures():
            chosen.setdefault(op_of(name), name)
    return sorted(chosen.values())


@pytest.mark.parametrize("name", one_case_per_op())
def test_conformance_case_runs_clean_under_sanitizers(name):
    case = all_cases()[name]
    inputs, outputs = case.data_sets[0]
    rep = backend.prepare(case.model)
    feeds = {n: as_array(x) for n, x in zip(rep.input_names, inputs)}
    compiled = rep.host(feeds).compiled  # the model as the backend specializes it for these inputs
    got = run_sanitized(compiled, [np.ascontiguousarray(feeds[t.name], t.dtype) for t in compiled.inputs])
    Runner.assert_similar_outputs([as_array(x) for x in outputs], got, rtol=case.rtol, atol=case.atol)
