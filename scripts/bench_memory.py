"""Per zoo model (the ones named on the command line, or all), float32 and int8 rows: the naive floor (ONNX node
order, one buffer per node output), the schedule floor and the arena with every value whole (`--ram-budget`
large), the arena of the default plan (streamed rows where they lower it, alloc/patch_plan.py), and with
`--max-recompute 10` and 15 (patches that may compute halos again), each with the extra MACs it adds, and
the plan chosen by default. Arenas in bytes, the last ones also over the naive floor.

int8 rows: the model quantized by cglow (per-channel weights, minmax calibration), except kws, quantized by
onnxruntime (quant_pre_process, then QDQ per-channel), compiled with --align 4 as a Cortex-M build would be.

Run with `make bench-memory`."""
from __future__ import annotations

from dataclasses import replace
import sys

import numpy as np

from cglow import zoo
from cglow.options import Options
from cglow.quantize import quantize_model
from cglow.tools.memory import analyze_model
from cglow.tools.reference import ort_quantized

WHOLE = 1 << 40  # a --ram-budget every plan fits: the whole-tensor plan
HEADER = (f"{'model':18} {'naive':>10} {'sched.':>10} {'whole':>10} {'default':>10} {'/naive':>6} "
          f"{'recomp.10':>10} {'extra':>6} {'recomp.15':>10} {'extra':>6} {'/naive':>6}  plan (default)")


def int8(name: str, model):
    if name == "kws":
        return ort_quantized(model), Options(align=4)
    rng = np.random.default_rng(0)
    calib = {i.name: rng.standard_normal((8, *[d.dim_value for d in i.type.tensor_type.shape.dim]))
             .astype(np.float32) for i in model.graph.input}
    return quantize_model(model, calib), Options()


def row(label: str, model, options: Options) -> str:
    whole, report = analyze_model(model, options=replace(options, ram_budget=WHOLE))
    default = analyze_model(model, options=options)[0]
    recompute = [analyze_model(model, options=replace(options, max_recompute=p))[0] for p in (10, 15)]
    naive = report.naive_floor
    extra = ["-" if c.patches is None else f"{100 * c.patches.extra_macs / c.patches.macs:.1f}%" for c in recompute]
    plan = "whole tensors" if default.patches is None else default.patches.lines()[0].split(" over ")[0] + \
        f", {default.patches.plan.tiles} tiles, {len(default.patches.nodes)} kernels to " \
        f"'{default.patches.nodes[-1]}'"
    return (f"{label:18} {naive:10} {report.schedule_floor:10} {whole.arena_bytes:10} {default.arena_bytes:10} "
            f"{default.arena_bytes / naive:6.2f} {recompute[0].arena_bytes:10} {extra[0]:>6} "
            f"{recompute[1].arena_bytes:10} {extra[1]:>6} {recompute[1].arena_bytes / naive:6.2f}  {plan}")


def main() -> None:
    print(HEADER)
    for name in sys.argv[1:] or list(zoo.MODELS):
        model = zoo.build(name)
        print(row(name, model, Options()), flush=True)
        quantized, options = int8(name, model)
        print(row(f"{name} int8", quantized, options), flush=True)


if __name__ == "__main__":
    main()
