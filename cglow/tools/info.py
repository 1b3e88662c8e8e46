"""`cglow info`: what a model holds and what its C needs, and every problem that keeps cglow from compiling it.

What the file says is always reported: the inputs and outputs, the op histogram (an ONNX file's nodes, op
types of other domains as domain.op; a TFLite file's operators by builtin) and the parameters (the elements of
its initializers or constant tensors). What the
compiled model needs only when it compiles: MACs (cglow.tools.macs), kernels, weights (flash), arena and RAM, the
memory floors (cglow.tools.memory) and an estimate of the code size (cglow.tools.code_size). For a model that compiles,
the inputs and outputs are those of net_run (a quantized model's 8-bit ones with their scale and zero point);
otherwise as the file declares them, a symbolic dimension by its name."""
from __future__ import annotations

from collections import Counter
import math

import onnx

from ..errors import CglowError, ModelProblems, one_line
from ..graph.ir import shape_text
from ..graph.quant.float_layers import float_layers
from ..model_file import TFLiteFile, open_model
from ..options import Options
from .code_size import code_size
from .macs import macs
from .memory import analyze_model

COMPILED_KEYS = ("float_layers", "macs", "kernels", "weights_bytes", "arena_bytes", "io_bytes", "ram_bytes",
                 "code_statements",
                 "code_bytes_per_statement", "code_bytes_estimate", "schedule_floor", "naive_floor",
                 "arena_over_naive_floor", "patches")


def parameters(model: onnx.ModelProto) -> int:
    """The elements of the model's initializers."""
    return sum(math.prod(t.dims) for t in model.graph.initializer)


def op_counts(model: onnx.ModelProto) -> dict[str, int]:
    """How many nodes of each op the file's graph holds, by op type (domain.op outside the ONNX domain)."""
    ops = Counter(n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}" for n in model.graph.node)
    return dict(sorted(ops.items()))


def _dtype_name(elem_type: int) -> str:
    try:
        return onnx.helper.tensor_dtype_to_np_dtype(elem_type).name
    except (KeyError, TypeError, ValueError):
        return f"type {elem_type}"


def declared(values, shapes: dict[str, tuple[int, ...]], constants: set[str]) -> list[dict]:
    """Graph inputs or outputs as the file declares them (--shape applied), initializers left out."""
    tensors = []
    for v in values:
        if v.name in constants:
            continue
        t = v.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else d.dim_param or "?" for d in t.shape.dim]
        shape = list(shapes[v.name]) if v.name in shapes else dims if t.HasField("shape") else None
        tensors.append(dict(name=v.name, dtype=_dtype_name(t.elem_type), shape=shape))
    return tensors


def compiled_tensors(infos) -> list[dict]:
    """net_run's inputs or outputs: name, dtype, shape, and a quantized one's scale and zero point."""
    return [dict(name=t.name, dtype=t.dtype.name, shape=list(t.shape))
            | ({} if t.scale is None else dict(scale=t.scale, zero_point=t.zero_point)) for t in infos]


def model_info(path: str, shapes: dict[str, tuple[int, ...]], options: Options = Options()) -> dict:
    """Every fact `cglow info --json` prints. A file that is not a readable model raises CglowError; a model
    cglow cannot compile has "supported" false, its problems listed and the compiled model's facts None."""
    model = open_model(path, options.max_memory)
    info = dict(supported=True, problems=[]) | _declared(model, shapes) | dict.fromkeys(COMPILED_KEYS)
    try:
        compiled, report = analyze_model(model, shapes=shapes, options=options)
    except CglowError as exc:
        return info | dict(supported=False, problems=exc.problems if isinstance(exc, ModelProblems) else [str(exc)])
    code = code_size(compiled.c_source, options.target)
    return info | dict(
        inputs=compiled_tensors(compiled.inputs), outputs=compiled_tensors(compiled.outputs),
        float_layers=float_layers(compiled.graph), macs=macs(compiled.program), kernels=len(compiled.program.instrs),
        weights_bytes=compiled.weights_bytes,
        arena_bytes=report.arena_bytes, io_bytes=report.io_bytes, ram_bytes=report.ram_bytes,
        code_statements=code.statements, code_bytes_per_statement=code.bytes_per_statement,
        code_bytes_estimate=code.estimate, schedule_floor=report.schedule_floor,
        naive_floor=report.naive_floor,
        arena_over_naive_floor=round(report.arena_bytes / report.naive_floor, 3) if report.naive_floor else None,
        patches=_patches(compiled.patches))


def _patches(patched) -> dict | None:
    """The span run in tiles (alloc/patch_plan.Patched), as facts."""
    if patched is None:
        return None
    p = patched.plan
    return dict(recompute=p.recompute, first_node=patched.nodes[0], last_node=patched.nodes[-1],
                kernels=len(patched.nodes), tiles=p.tiles, tile_rows=patched.tile_rows, rows=patched.height,
                halo_rows=patched.halo, extra_macs=patched.extra_macs, arena_without=patched.whole_arena,
                flash_added=patched.flash_added, lines=patched.lines())


def _declared(model: onnx.ModelProto | TFLiteFile, shapes: dict[str, tuple[int, ...]]) -> dict:
    """What the file says: its inputs and outputs, op histogram and parameters."""
    if isinstance(model, TFLiteFile):
        m = model.model
        names = [m.tensors[i].name for i in m.inputs]
        facts = dict(inputs=model.declared(m.inputs), outputs=model.declared(m.outputs), ops=model.op_counts(),
                     parameters=model.parameters())
    else:
        constants = {t.name for t in model.graph.initializer}
        names = [v.name for v in model.graph.input if v.name not in constants]
        facts = dict(inputs=declared(model.graph.input, shapes, constants),
                     outputs=declared(model.graph.output, {}, set()), ops=op_counts(model),
                     parameters=parameters(model))
    unknown = sorted(set(shapes) - set(names))
    if unknown:
        raise CglowError(f"--shape names no graph input: {', '.join(unknown)}; the inputs are {', '.join(names)}")
    return facts


def _tensor_line(t: dict) -> str:
    shape = "[?]" if t["shape"] is None else shape_text(t["shape"])
    quantized = f"  scale {t['scale']:.6g}, zero point {t['zero_point']}" if "scale" in t else ""
    return one_line(f"  {t['name']}  {t['dtype']}{shape}{quantized}")


def info_lines(info: dict, target: str) -> list[str]:
    """`cglow info` as text: one fact per line, names escaped (they are data)."""
    lines = []
    for kind in ("inputs", "outputs"):
        lines += [f"{kind}:"] + [_tensor_line(t) for t in info[kind]]
    lines.append(one_line("ops: " + ", ".join(f"{op} {n}" for op, n in info["ops"].items())))
    lines.append(f"parameters: {info['parameters']}")
    if not info["supported"]:
        return lines + ["supported: no"] + [f"  {one_line(problem)}" for problem in info["problems"]]

    def size(key: str, text: str) -> str:
        return f"{text}: {info[key]} bytes ({info[key] / 1024:.1f} KiB)"
    return lines + ["supported: yes"] + [f"  {one_line(line)}" for line in info["float_layers"]] + [
        f"MACs: {info['macs']} ({info['macs'] / 1e6:.2f} M)", f"kernels: {info['kernels']}",
        size("weights_bytes", "weights (flash, NET_WEIGHTS_BYTES)"),
        size("arena_bytes", "arena (RAM, NET_ARENA_BYTES)"), size("ram_bytes", "RAM (arena + inputs and outputs)"),
        size("code_bytes_estimate", "code (flash), estimated") + f": {info['code_statements']} C statements x "
        f"{info['code_bytes_per_statement']} bytes (--target {target})",
        size("schedule_floor", "schedule floor (inputs and outputs included)"),
        size("naive_floor", "naive floor (ONNX node order)"),
        f"arena / naive floor: {info['arena_over_naive_floor']}"] + (
        ["patches: none (every value whole)"] if info["patches"] is None else
        ["patches: " + one_line(info["patches"]["lines"][0])] + [f"  {one_line(x)}" for x in info["patches"]["lines"][1:]])
