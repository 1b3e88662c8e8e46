"""The ONNX node conformance suite through cglow (cglow.tools.backend, the C built by the host compiler): every case
the installed onnx package generates, each run apart by onnx's official runner (onnx.backend.test.BackendTest),
less the families out of an inference compiler's reach; per op, its cases, the ones passed and why the others
fail. `python -m cglow.tools.coverage docs/coverage.md` (make docs) writes the table; tests/ops/test_conformance.py
holds cglow to the cases it passes."""
from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from dataclasses import dataclass
import multiprocessing
import re
import signal
import sys
import warnings

import numpy as np
import onnx
from onnx import numpy_helper

# The families outside the reach, by op, with the reason shown in the table.
OUT_OF_REACH = {
    "strings": {"StringNormalizer", "StringConcat", "StringSplit", "RegexFullMatch", "LabelEncoder"},
    "sequences": {"SequenceAt", "SequenceConstruct", "SequenceEmpty", "SequenceErase", "SequenceInsert",
                  "SequenceLength", "SequenceMap", "SplitToSequence", "ConcatFromSequence"},
    "optionals": {"Optional", "OptionalGetElement", "OptionalHasElement"},
    "random sampling": {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial",
                        "Bernoulli"},
    "training optimizers": {"Adagrad", "Adam", "Momentum", "Gradient"},
    "image decoding": {"ImageDecoder"},
}
CASE_SECONDS = 300  # a case still compiling or running after this long fails as "timed out"


def _value_family(value: onnx.ValueInfoProto) -> str | None:
    """The out-of-reach family of a graph input's or output's type: a sequence, an optional, strings."""
    kind = value.type.WhichOneof("value")
    if kind == "sequence_type":
        return "sequences"
    if kind == "optional_type":
        return "optionals"
    if kind == "tensor_type" and value.type.tensor_type.elem_type == onnx.TensorProto.STRING:
        return "strings"
    return None


def family(model: onnx.ModelProto) -> str | None:
    """The out-of-reach family a case's model belongs to, by its ops (every node's, subgraphs' too), by its nodes'
    domain (the issue takes the default domain: ai.onnx.ml's classical ML ops are another), or by its inputs' and
    outputs' types; None for a case in reach."""
    def ops(graph: onnx.GraphProto):
        for node in graph.node:
            yield node.op_type
            for a in node.attribute:
                for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                    yield from ops(g)
    found = set(ops(model.graph))
    if any(node.domain == "ai.onnx.ml" for node in model.graph.node):
        return "ai.onnx.ml domain"
    for name, members in OUT_OF_REACH.items():
        if found & members:
            return name
    for value in list(model.graph.input) + list(model.graph.output):
        if _value_family(value):
            return _value_family(value)
    return None


def collect() -> dict:
    """Every node case of the installed onnx package, by name."""
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return {case.name: case for case in collect_testcases()}


def op_of(cases: dict, name: str) -> str:
    """The op a case tests: its single node's, else (an expanded function body, a small graph) its base case's
    single node's, else its first node's."""
    base = cases.get(name.split("_expanded")[0], cases[name])
    nodes = base.model.graph.node if len(base.model.graph.node) == 1 else cases[name].model.graph.node
    return nodes[0].op_type


def _timed_out(signum, frame):
    raise TimeoutError(f"timed out after {CASE_SECONDS} s")


def _reason(failure: str) -> str:
    """One line that says why a case failed, from its traceback (a C build's first error, else the exception's
    message), its names and paths blurred so that alike failures group."""
    lines = failure.strip().splitlines()
    errors = [line for line in lines if "error:" in line and not line.startswith(("Traceback", "  "))]
    last = next((line for line in reversed(lines) if re.match(r"[\w.]+(Error|Problems|Exception)\b", line)),
                lines[-1] if lines else "failed")
    if errors and "failed on generated code" in failure:
        text = "C build: " + errors[0].split("error:", 1)[1].strip()
    elif last.startswith("AssertionError") and ("Not equal to tolerance" in failure or "Mismatch" in failure):
        text = "wrong values"
    else:
        text = last.split(": ", 1)[1] if ": " in last else last
    return re.sub(r"/tmp/\S+", "…", re.sub(r"'[^']*'|‘[^’]*’", "'…'", text))[:140]


def as_array(value) -> np.ndarray:
    """A data set's tensor as an array: the suite holds those of types NumPy lacks (bfloat16, float8, 4-bit...) as
    TensorProtos, which read as ml_dtypes arrays."""
    return numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else np.asarray(value)


_TESTS: dict = {}  # each worker's: case name -> its test of onnx's official runner


def _start(names: list[str]) -> None:
    """A worker's official runner (onnx.backend.test.BackendTest over tools/backend.py) of the cases named."""
    import unittest
    from onnx.backend.test import BackendTest
    from . import backend
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runner = BackendTest(backend, "cglow_coverage")
        runner.include("^(" + "|".join(re.escape(n) for n in names) + ")_cpu$")
        tests = list(unittest.TestSuite(runner.test_suite))

    def flat(suite):
        for t in suite:
            yield from (flat(t) if isinstance(t, unittest.TestSuite) else [t])
    for test in flat(tests):
        _TESTS[test.id().rsplit(".", 1)[1].removesuffix("_cpu")] = test


def run_case(name: str) -> tuple[str, str | None]:
    """Runs one case's official test: (name, None) when it passes, else (name, why)."""
    import unittest
    signal.signal(signal.SIGALRM, _timed_out)
    signal.alarm(CASE_SECONDS)
    result = unittest.TestResult()
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            _TESTS[name].run(result)
    except TimeoutError as exc:
        return name, str(exc)
    finally:
        signal.alarm(0)
    problems = result.failures + result.errors
    if problems:
        return name, _reason(problems[0][1])
    return name, f"skipped: {result.skipped[0][1]}" if result.skipped else None


@dataclass
class Coverage:
    """Per op: its cases in reach, the names of those passed, the failures' reasons; and the out-of-reach cases
    by family."""
    cases: dict[str, list[str]]
    passed: set[str]
    failures: dict[str, str]
    out_of_reach: dict[str, list[str]]


def measure(names: list[str] | None = None, jobs: int | None = None) -> Coverage:
    """Runs the cases (all of them, or `names`) in `jobs` worker processes."""
    cases = collect()
    by_op, out = defaultdict(list), defaultdict(list)
    for name in sorted(names or cases):
        reach = family(cases[name].model)
        (out[reach] if reach else by_op[op_of(cases, name)]).append(name)
    todo = [n for op in by_op.values() for n in op]
    with multiprocessing.get_context("fork").Pool(jobs, initializer=_start, initargs=(todo,)) as pool:
        results = dict(pool.imap_unordered(run_case, todo))
    return Coverage(dict(by_op), {n for n, why in results.items() if why is None},
                    {n: why for n, why in results.items() if why is not None}, dict(out))


def _totals(cov: Coverage, expanded: bool) -> tuple[int, int]:
    names = [n for op in cov.cases.values() for n in op if expanded or "_expanded" not in n]
    return sum(n in cov.passed for n in names), len(names)


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def table(cov: Coverage) -> str:
    """The coverage page: totals, then one row per op."""
    passed, total = _totals(cov, True)
    plain_passed, plain = _totals(cov, False)
    reach = sum(len(v) for v in cov.out_of_reach.values())
    lines = [
        "# ONNX node conformance coverage", "",
        f"onnx {onnx.__version__}: {total + reach} node cases, {reach} of them out of reach (below); of the "
        f"{total} others cglow passes **{passed} ({_percent(passed, total)})**, "
        f"{plain_passed} of {plain} without the `_expanded` function-body variants ({_percent(plain_passed, plain)}).",
        "",
        "Each case runs through onnx's official runner (`onnx.backend.test.BackendTest`) over "
        "`cglow.tools.backend`: compiled to C by cglow, built by the host's C compiler, its outputs compared with "
        "the case's within its own tolerances.", "",
        "| op | cases | passed | why not |", "|---|---:|---:|---|"]
    for op in sorted(cov.cases):
        names = cov.cases[op]
        why = Counter(cov.failures[n] for n in names if n in cov.failures)
        reasons = "; ".join(f"{r} ({k})" if k > 1 else r for r, k in why.most_common())
        lines.append(f"| {op} | {len(names)} | {sum(n in cov.passed for n in names)} | "
                     f"{reasons.replace('|', '/')} |")
    lines += ["", "## Out of reach", "", "| family | cases |", "|---|---:|"]
    lines += [f"| {name} | {len(cov.out_of_reach[name])} |" for name in sorted(cov.out_of_reach)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cglow.tools.coverage", description=__doc__.split("\n\n")[0])
    parser.add_argument("output", help="the Markdown page to write")
    parser.add_argument("--jobs", type=int, default=None, help="worker processes (default: one per core)")
    parser.add_argument("cases", nargs="*", help="case names (default: every case)")
    args = parser.parse_intermixed_args(argv)
    cov = measure(args.cases or None, args.jobs)
    with open(args.output, "w") as f:
        f.write(table(cov))
    passed, total = _totals(cov, True)
    print(f"{passed} of {total} cases passed; {args.output} written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
