"""Applies to every folder below tests/. The slow suites (by file name, in SLOW), marked so that `make quick`
(`pytest -m "not slow"`) leaves them out. Of a parametrized test with more than QUICK_CASES cases, the quick
subset keeps a stable sample of QUICK_CASES (by a hash of each case's id) and marks the rest slow, unless its
module chose the quick cases itself (marked some slow). `make test` runs every case. After a run that included
the conformance cases: their counts per op, as the issue asks to report; after one that included the cross-target
matrix (tests/tools/test_cross_targets.py): target x model, pass or fail and the largest error against the host
build."""
from __future__ import annotations

import collections
import hashlib

import pytest

SLOW = {"test_cross_targets.py", "test_cross_int8.py", "test_cross_m4.py", "test_cross_size.py", "test_compilers.py",
        "test_sanitizers.py", "test_fuzz_graphs.py", "test_fuzz_older_opsets.py", "test_fuzz_quantized.py",
        "test_fuzz_typed.py", "test_fuzz_bytes.py", "test_wheel.py", "test_emitted_identity.py"}


QUICK_CASES = 4  # of each parametrized test's cases in `make quick` (the others need a compiler once each, cold)


def pytest_collection_modifyitems(items):
    cases = collections.defaultdict(list)
    for item in items:
        if item.path.name in SLOW:
            item.add_marker(pytest.mark.slow)
        elif hasattr(item, "callspec"):
            cases[item.path, item.originalname].append(item)
    for group in cases.values():
        if not any(item.get_closest_marker("slow") for item in group):
            for item in sorted(group, key=lambda i: hashlib.sha256(i.nodeid.encode()).digest())[QUICK_CASES:]:
                item.add_marker(pytest.mark.slow)


def pytest_terminal_summary(terminalreporter):
    conformance_table(terminalreporter)
    cross_matrix(terminalreporter)


def conformance_table(terminalreporter):
    outcomes = {}
    for outcome in ("passed", "failed", "xfailed", "xpassed"):
        for report in terminalreporter.stats.get(outcome, []):
            if "tests/ops/test_conformance.py::test_node_case[" in report.nodeid and report.when in ("call", "setup"):
                outcomes[report.nodeid.split("[", 1)[1][:-1]] = outcome
    if not outcomes:
        return
    from tests.conformance_cases import all_cases, in_scope, op_of, other_types
    table = collections.defaultdict(collections.Counter)
    for name, outcome in outcomes.items():
        table[op_of(name)][outcome] += 1
    for name in all_cases():
        if in_scope(name) and other_types(name):
            table[op_of(name)]["other types"] += 1
    write = terminalreporter.write_line
    terminalreporter.section("ONNX node conformance, ops in scope")
    total = collections.Counter()
    write(f"{'op':24} {'cases':>6} {'passed':>7} {'xfail':>6} {'failed':>7} {'other types (not run)':>22}")
    for op in sorted(table):
        c = table[op]
        total.update(c)
        run = c["passed"] + c["failed"] + c["xfailed"] + c["xpassed"]
        write(f"{op:24} {run:6} {c['passed']:7} {c['xfailed']:6} {c['failed'] + c['xpassed']:7} "
              f"{c['other types']:22}")
    run = total["passed"] + total["failed"] + total["xfailed"] + total["xpassed"]
    write(f"{'total':24} {run:6} {total['passed']:7} {total['xfailed']:6} {total['failed'] + total['xpassed']:7} "
          f"{total['other types']:22}")


def cross_matrix(terminalreporter):
    cells = {}
    for outcome, word in (("passed", "pass"), ("failed", "FAIL"), ("skipped", "skip")):
        for report in terminalreporter.stats.get(outcome, []):
            if "tests/tools/test_cross_targets.py::test_matches_the_host_build[" in report.nodeid and \
                    (report.when == "call" or outcome != "passed"):
                model, target = report.nodeid.split("[", 1)[1][:-1].split("-", 1)  # no model name has a dash
                error = dict(report.user_properties).get("max_error")
                cells[target, model] = word + (f" {error:.1e}" if error is not None else "")
    if not cells:
        return
    from tests.tools.test_cross_targets import MODELS, NOT_RUN, TARGETS, TOLERANCE
    write = terminalreporter.write_line
    terminalreporter.section("cross targets under QEMU against the host build: largest error / output scale")
    write(f"{'target':14}" + "".join(f" {model:>13}" for model in MODELS))
    for target in TARGETS:
        write(f"{target:14}" + "".join(f" {cells.get((target, model), '-'):>13}" for model in MODELS))
    write(f"pass: within {TOLERANCE:g}; -: not run ({NOT_RUN})")
