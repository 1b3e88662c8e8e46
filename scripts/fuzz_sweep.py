"""A seed sweep of the differential fuzzer (tests/fuzz): graphs 0 .. N-1 of each seed, each checked as
tests/fuzz/test_fuzz_graphs.py checks it (the sanitized build and one gcc and one clang level of the compiler matrix
against onnxruntime), or with --quantized the quantized layers as tests/fuzz/test_fuzz_quantized.py does, in parallel
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

from tests.fuzz.differential import (check_graph, check_quantized, reference_case,  # noqa: E402  (after the path)
                                     settings)


def one(case: tuple[int, int, bool]) -> tuple[int, int, str | None]:
    seed, index, quantized = case
    try:
        return seed, index, check_quantized(seed, index) if quantized else \
            check_graph(*reference_case(seed, index), settings(index))
    except Exception as exc:  # noqa: BLE001 - report the graph, go on
        return seed, index, f"{type(exc).__name__}: {exc}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", required=True)
    parser.add_argument("--graphs", type=int, default=200, help="graphs per seed (default 200)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--quantized", action="store_true", help="the quantized layers (tests/fuzz/quantized.py)")
    args = parser.parse_args(argv)
    cases = [(seed, index, args.quantized) for seed in args.seeds for index in range(args.graphs)]
    replay = "check_quantized({0}, {1})" if args.quantized else "check_graph(*reference_case({0}, {1}), settings({1}))"
    start, failed = time.perf_counter(), 0
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for seed, index, problem in pool.map(one, cases, chunksize=4):
            if problem:
                failed += 1
                print(f"graph {index} of seed {seed}: {problem}\n  replay: python -c 'from tests.fuzz.differential "
                      f"import *; print({replay.format(seed, index)})'", flush=True)
    kind = "quantized graphs" if args.quantized else "graphs"
    print(f"fuzz sweep: {len(cases)} {kind} of seeds {' '.join(map(str, args.seeds))}, {failed} failed, "
          f"in {time.perf_counter() - start:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
