"""The ONNX backend node conformance cases of every op in scope, through cglow.tools.backend (generated C,
built on the host). Expected failures are listed with their reasons in conformance_xfail.txt; an
expected failure that passes fails the run, so the list can only shrink."""
from __future__ import annotations

from onnx.backend.test.runner import Runner
import pytest

from cglow.tools import backend
from cglow.tools.coverage import as_array
from cglow.tools.host import check_warnings, sources

from tests.conformance_cases import all_cases, expected_failures, op_of, run_cases
from tests.util import need_tool

XFAIL = expected_failures()


def _quick_cases() -> set[str]:
    """One case of each op for `make quick` (the first by name that is not an expected failure, if there is one);
    `make test` runs them all."""
    first = {}
    for name in sorted(run_cases(), key=lambda n: (n in XFAIL, n)):
        first.setdefault(op_of(name), name)
    return set(first.values())


def _params():
    quick = _quick_cases()
    for name in run_cases():
        marks = [pytest.mark.xfail(reason=XFAIL[name], strict=True)] if name in XFAIL else []
        marks += [] if name in quick else [pytest.mark.slow]
        yield pytest.param(name, marks=marks, id=name)


def test_expected_failures_name_real_cases():
    assert set(XFAIL) <= set(run_cases())


@pytest.mark.parametrize("name", _params())
def test_node_case(name):
    """The case's outputs through the C built with the host compiler; the same C must also pass clang
    under the strict flags without a warning."""
    clang = need_tool("clang")
    case = all_cases()[name]
    rep = backend.prepare(case.model)
    for inputs, outputs in case.data_sets:  # compared as onnx's official runner compares them
        Runner.assert_similar_outputs([as_array(x) for x in outputs], rep.run([as_array(x) for x in inputs]),
                                      rtol=case.rtol, atol=case.atol)
    for host in rep.hosts.values():
        check_warnings(sources(host.compiled), clang)
