"""Image sizes on a microcontroller per benchmark model (the ones named on the command line, or those of
scripts/bench.py): cglow's C with the target's `--target` preset and the bare-metal harness (cglow.tools.cross,
the same image as `make bench-mcu` builds: arm-none-eabi-gcc -O2 for Cortex-M4F by default, picolibc with
semihosting), measured with the target's size.

Columns, in bytes: text (code and constants: flash), data (initialized variables: flash and RAM), bss
(zeroed variables: RAM) of the linked image; NET_WEIGHTS_BYTES and NET_ARENA_BYTES from the generated
header; code, what the model adds to flash besides its weights: the image's text + data minus the bare
harness's, the weights and the embedded test input (the net's code and the math functions it links). The
bare harness is the same harness around a one-element Identity net: start-up code, the C library's I/O
and the harness itself, what any image has. A model whose weights exceed the target's flash or whose arena
exceeds its RAM is listed as not fitting. The stack is not counted. Images build in parallel (--jobs) and
are cached by hash (cglow.tools.host.build_cached). The script exits with status 1 when a build fails.

Run with `make size`; `python scripts/size_mcu.py kws resnet8` measures a subset."""
from __future__ import annotations

import argparse
from concurrent.futures import ThreadPoolExecutor
import os
import re
import shutil
import sys

from onnx import TensorProto, helper

from bench import MODELS, seeded_inputs
from bench_mcu import first_line
import cglow
from cglow import zoo
from cglow.tools import cross
from cglow.compiler import CompiledModel
from cglow.options import Options
from cglow.tools.targets import MIB, TARGETS, Target

HARNESS = "bare harness"


class Parser(argparse.ArgumentParser):
    def error(self, message: str):
        """Bad command-line input: one line on stderr, exit status 2."""
        self.exit(2, f"size-mcu: error: {message}\n")


def bare_net() -> CompiledModel:
    """A one-element Identity net: the harness around it is the bare harness."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "bare", [x], [y])
    return cglow.compile_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), name="net")


def header_bytes(compiled: CompiledModel, what: str) -> int:
    """A byte count the generated header defines: what is ARENA or WEIGHTS."""
    return int(re.search(rf"#define {compiled.name.upper()}_{what}_BYTES (\d+)", compiled.h_source)[1])


def measure(name: str, compiled: CompiledModel, target: Target) -> dict:
    """The row of one image (in a worker thread)."""
    inputs = seeded_inputs(compiled)
    row = dict(name=name, weights=header_bytes(compiled, "WEIGHTS"), arena=header_bytes(compiled, "ARENA"),
               input=sum(x.nbytes for x in inputs))
    try:
        row["text"], row["data"], row["bss"] = cross.image_size(cross.build_image(compiled, inputs, target), target)
    except Exception as e:  # noqa: BLE001 - report the model, go on
        row["note"], row["failed"] = f"build failed: {first_line(e)}", True
    return row


def table(harness: dict, rows: list[dict]) -> list[str]:
    """The harness's row, then the models'."""
    lines = [f"{'image':14} {'text':>9} {'data':>7} {'bss':>9} {'NET_WEIGHTS_BYTES':>18} {'NET_ARENA_BYTES':>16} "
             f"{'code':>8}"]
    for r in (harness, *rows):
        if "note" in r:
            lines.append(f"{r['name']:14} {r['note']}")
            continue
        cells = ("-", "-", "-")
        if r is not harness and "note" not in harness:
            code = r["text"] + r["data"] - harness["text"] - harness["data"] - r["weights"] - r["input"]
            cells = (r["weights"], r["arena"], code)
        lines.append(f"{r['name']:14} {r['text']:9} {r['data']:7} {r['bss']:9} {cells[0]:>18} {cells[1]:>16} "
                     f"{cells[2]:>8}")
    return lines


def main(argv: list[str] | None = None) -> int:
    bare_metal = sorted(name for name, t in TARGETS.items() if t.flash_bytes is not None)
    parser = Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", help=f"zoo models (default: {' '.join(MODELS)})")
    parser.add_argument("--target", default="cortex-m4", choices=bare_metal, help="default cortex-m4")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel builds (default: cores)")
    args = parser.parse_args(argv)
    unknown = [n for n in args.models if n not in zoo.MODELS]
    if unknown:
        parser.error(f"unknown models {', '.join(unknown)}; the zoo has {', '.join(zoo.MODELS)}")
    target = TARGETS[args.target]
    missing = [tool for tool in target.tools if shutil.which(tool) is None]
    if missing:
        print(f"size-mcu: error: {', '.join(missing)} not found (scripts/install-tools.sh installs them)",
              file=sys.stderr)
        return 2

    with ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        harness = pool.submit(measure, HARNESS, bare_net(), target)
        rows = []
        for name in args.models or MODELS:
            compiled = cglow.compile_model(zoo.build(name), options=Options(target=target.tiles))
            if compiled.weights_bytes > target.flash_bytes or compiled.arena_bytes > target.ram_bytes:
                rows.append(dict(name=name, note=f"does not fit: {compiled.weights_bytes / MIB:.1f} MiB of weights, "
                                 f"{compiled.arena_bytes / MIB:.1f} MiB of arena; the target has "
                                 f"{target.flash_bytes / MIB:g} MiB of flash, {target.ram_bytes / MIB:g} MiB of RAM"))
                continue
            rows.append(pool.submit(measure, name, compiled, target))
        harness, rows = harness.result(), [r if isinstance(r, dict) else r.result() for r in rows]
    print(f"cglow: {' '.join((target.cc, *cross.OPT_FLAGS, *target.cflags))} and the strict flags, "
          f"{' '.join(target.ldflags[:3])}; {target.binutils}size of each image, in bytes")
    print("\n".join(table(harness, rows)))
    return 1 if any(r.get("failed") for r in (harness, *rows)) else 0


if __name__ == "__main__":
    sys.exit(main())
