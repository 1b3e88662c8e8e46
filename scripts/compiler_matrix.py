"""The compiler matrix of the zoo (cglow.tools.matrix): each model's C built with gcc -O1 -O2 -O3 -Os and clang -O2 -O3
on the host (--target generic) and with arm-none-eabi-gcc -O2 -Os for the Cortex-M4 (--target cortex-m4, run under
QEMU where the weights fit its 4 MiB of flash), run on one seeded input, against onnxruntime.

Each cell is the largest error of the model's outputs over their scale (cglow.tools.reference.rel_error); "=" marks
the same bits as the first level of the same compiler, "!" different bits. A cell above the tolerance (1e-5) or
a "!" makes the script exit with status 1. tests/tools/test_compilers.py checks the same on every model but
MobileNetV2, whose 55 MB of C this script adds (gcc takes about 10 s and clang 30 s to compile it).

Run with `make compilers`; `python scripts/compiler_matrix.py kws mobilevit` for a subset, `--gcc gcc-11
--clang clang-16` for other host compilers at the same levels."""
from __future__ import annotations

import argparse
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
import os
import sys

import onnxruntime

import cglow
from cglow import zoo
from cglow.tools import matrix
from cglow.options import Options
from cglow.tools.reference import reference_outputs, rel_error, seeded_inputs
from cglow.tools.targets import TARGETS


def row(name: str, pool: ThreadPoolExecutor, settings: tuple[matrix.Setting, ...]) -> tuple[list[str], bool]:
    """The model's cells, and whether every one is within the tolerance and has the bits it must."""
    model = zoo.build(name)
    compiled = {t: cglow.compile_model(model, options=Options(target=t)) for t in ("generic", "cortex-m4")}
    inputs = seeded_inputs(compiled["generic"])
    _, want = reference_outputs(model, {t.name: x for t, x in zip(compiled["generic"].inputs, inputs)})

    def run(setting: matrix.Setting):
        c = compiled[TARGETS[setting.target].tiles if setting.target else "generic"]
        if setting.target and c.weights_bytes > TARGETS[setting.target].flash_bytes:
            return None
        return matrix.outputs(c, inputs, setting)
    got = dict(zip(settings, pool.map(run, settings)))
    cells, ok = [], True
    for setting in settings:
        if got[setting] is None:
            cells.append("-")
            continue
        error = max(rel_error(g, w) for g, w in zip(got[setting], want))
        first = next(s for s in settings if matrix.bitwise_alike(s, setting))
        same = matrix.same_bits(got[setting], got[first])
        cells.append(f"{'' if setting == first else '=' if same else '!'}{error:.1e}")
        ok = ok and same and error <= matrix.TOLERANCE
    return cells, ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", help="zoo models (default: all)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel builds (default: cores)")
    parser.add_argument("--gcc", default="gcc", help="the host gcc (default gcc)")
    parser.add_argument("--clang", default="clang", help="the host clang (default clang)")
    args = parser.parse_args(argv)
    names = {"gcc": args.gcc, "clang": args.clang}
    settings = tuple(replace(s, cc=names.get(s.cc, s.cc)) for s in matrix.HOST) + matrix.CROSS
    unknown = [n for n in args.models if n not in zoo.MODELS]
    if unknown:
        parser.error(f"unknown models {', '.join(unknown)}; the zoo has {', '.join(zoo.MODELS)}")
    print(f"largest error over the output's scale against onnxruntime {onnxruntime.__version__} (tolerance "
          f"{matrix.TOLERANCE:g}); '=' the same bits as the first level of the compiler, '!' not; '-' the weights "
          f"do not fit the target's flash")
    width = 13
    print(f"{'model':12}" + "".join(f"{s.label.replace('arm-none-eabi-gcc', 'arm-gcc'):>{width}}" for s in settings))
    failed = []
    with ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        for name in args.models or zoo.MODELS:
            cells, ok = row(name, pool, settings)
            print(f"{name:12}" + "".join(f"{c:>{width}}" for c in cells), flush=True)
            failed += [] if ok else [name]
    print(f"compiler matrix: {'FAILED on ' + ', '.join(failed) if failed else 'every setting agrees'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
