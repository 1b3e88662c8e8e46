"""A seed sweep of the differential fuzzer (tests/fuzz): graphs 0 .. N-1 of each seed, each checked as
tests/fuzz/test_fuzz_graphs.py checks it (the sanitized build and one gcc and one clang level of the compiler matrix
against onnxruntime), or with --quantized the quantized layers as tests/fuzz/test_fuzz_quantized.py does, or with
--typed the graphs in each of float16, bfloat16 and float64 as tests/fuzz/test_fuzz_typed.py does, in parallel
processes. Prints every graph that fails, with how to replay it, and a summary; exits with status 1 if one failed.

Run from the repository root: `python scripts/fuzz_sweep.py --seeds 1 2 3 4 5 6 7 8 9 10 --graphs 200` runs 2000."""
from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor
import os
from pathlib import Path
import sys
import time

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fuzz.differential import (check_graph, check_quantized, check_typed,  # noqa: E402  (after the path)
                                     reference_case, settings)
from tests.fuzz.typed import TYPES  # noqa: E402

CHECKS = {  # kind -> its check of graph `index` of `seed`, and the call that replays it
    "float32": (lambda seed, index: check_graph(*reference_case(seed, index), settings(index)),
                "check_graph(*reference_case({0}, {1}), settings({1}))"),
    "quantized": (check_quantized, "check_quantized({0}, {1})"),
    **{t: (lambda seed, index, t=t: check_typed(t, seed, index), f'check_typed("{t}", {{0}}, {{1}})') for t in TYPES},
}


def one(case: tuple[int, int, str]) -> tuple[int, int, str, str | None]:
    seed, index, kind = case
    try:
        return seed, index, kind, CHECKS[kind][0](seed, index)
    except Exception as exc:  # noqa: BLE001 - report the graph, go on
        return seed, index, kind, f"{type(exc).__name__}: {exc}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", required=True)
    parser.add_argument("--graphs", type=int, default=200, help="graphs per seed (default 200)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--quantized", action="store_true", help="the quantized layers (tests/fuzz/quantized.py)")
    which.add_argument("--typed", action="store_true", help="the graphs in float16, bfloat16 and float64 "
                                                            "(tests/fuzz/typed.py): --graphs per seed of each")
    args = parser.parse_args(argv)
    kinds = list(TYPES) if args.typed else ["quantized" if args.quantized else "float32"]
    cases = [(seed, index, kind) for seed in args.seeds for index in range(args.graphs) for kind in kinds]
    start, failed = time.perf_counter(), 0
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for seed, index, kind, problem in pool.map(one, cases, chunksize=4):
            if problem:
                failed += 1
                print(f"{kind} graph {index} of seed {seed}: {problem}\n  replay: python -c 'from "
                      f"tests.fuzz.differential import *; print({CHECKS[kind][1].format(seed, index)})'", flush=True)
    print(f"fuzz sweep: {len(cases)} {', '.join(kinds)} graphs of seeds {' '.join(map(str, args.seeds))}, "
          f"{failed} failed, in {time.perf_counter() - start:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
