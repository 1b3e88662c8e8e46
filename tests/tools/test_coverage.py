"""The coverage table of the ONNX node suite (cglow.tools.coverage): cases in and out of reach, run apart, their
failures' reasons grouped per op."""
from __future__ import annotations

from cglow.tools import coverage

CASES = ["test_abs", "test_nonzero_example", "test_training_dropout", "test_sequence_insert_at_front",
         "test_softmax_axis_0_expanded", "test_softmax_axis_0"]


def test_a_table_of_cases_passed_and_why_not():
    cov = coverage.measure(CASES, jobs=1)
    assert cov.out_of_reach == {"sequences": ["test_sequence_insert_at_front"]}
    assert cov.passed == {"test_abs", "test_softmax_axis_0", "test_softmax_axis_0_expanded"}
    assert cov.cases["Softmax"] == ["test_softmax_axis_0", "test_softmax_axis_0_expanded"]
    assert "unsupported operators: NonZero" in cov.failures["test_nonzero_example"]
    assert "training_mode=1 with a non-zero ratio" in cov.failures["test_training_dropout"]
    page = coverage.table(cov)
    assert "cglow passes **3 (60.0%)**, 2 of 4 without the `_expanded`" in page
    assert "| Abs | 1 | 1 |  |" in page and "| sequences | 1 |" in page
    assert "| NonZero | 1 | 0 | unsupported operators: NonZero ('…')" in page
