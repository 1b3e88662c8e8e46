"""The pipeline: import, graph passes, lowering, instruction passes, allocation, C emission."""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import onnx

from .alloc.arena import Plan, allocate
from .alloc.patch_plan import Patched, choose
from .emit_c.emit import TensorInfo, c_identifier, emit
from .graph import passes as graph_passes
from .graph.capacity import lower_capacities
from .graph.ir import Graph
from .graph.limits import check_bytes
from .graph.onnx_import import import_model, load
from .graph.quant.io import float_io, integer_io, quantized_io
from .graph.tflite.importer import import_tflite
from .instr import passes as instr_passes
from .instr.half_math import native_half
from .instr.ir import Program
from .instr.patches import PatchPlan
from .lower.program import lower
from .model_file import TFLiteFile, as_model
from .options import MAX_MEMORY, Options
from .stages import Stages, stage_name
from .tiles import tiles_for


@dataclass(frozen=True)
class CompiledModel:
    name: str                      # the C symbol prefix
    c_source: str
    h_source: str
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    arena_bytes: int
    weights_bytes: int
    program: Program
    plan: Plan
    options: Options = Options()
    weights_blob: bytes = b""      # with options.external_weights: the weights file (NET_WEIGHTS_BYTES bytes)
    graph: Graph | None = None     # from compile_model: the graph it lowered (after the graph passes)
    imported: Graph | None = None  # and the model's graph as imported (capacities lowered), before them (memory report)
    patches: Patched | None = None  # the span run in tiles (alloc/patch_plan.py)


def compile_program(prog: Program, name: str, inputs, outputs, source: str = "", opset: int = 0,
                    options: Options = Options(), header: str = "", stages: Stages = Stages()) -> CompiledModel:
    """The back end: instruction passes, arena allocation and C emission for a lowered program.

    `inputs` and `outputs` are TensorInfo in the order of prog.inputs and prog.outputs; the C file includes
    `header` (default: the prefix plus .h); `stages` runs each pass and step."""
    tiles = tiles_for(options.target)
    integer = tiles.for_integer
    for rewrite in instr_passes.FUSING:
        prog = stages.run(f"instr-{stage_name(rewrite)}", rewrite, prog)
    finished: dict[PatchPlan | None, tuple[Program, Plan]] = {}  # the planner's runs, unless observers watch

    def finish(patches: PatchPlan | None, watch: Stages = Stages()) -> tuple[Program, Plan]:
        """The passes after fusion, with the span run in tiles, and the allocation."""
        if patches in finished and not watch.observers:
            return finished[patches]
        done = prog
        for rewrite in instr_passes.after_fusing(integer.dual_mac, integer.for_panel.rows, patches,
                                                 tiles.vector_dot.rows if tiles.vector_dot else 0, tiles.signed_dots,
                                                 tiles.wide_weights, bool(tiles.column_blocks),
                                                 tiles.chunk_columns if options.narrow_weights else 0,
                                                 options.nibble_weights):
            done = watch.run(f"instr-{stage_name(rewrite)}", rewrite, done)
        finished[patches] = done, watch.run("alloc", allocate, done, options.align, options.io_in_arena)
        return finished[patches]
    patched = stages.run("patch-plan", choose, prog, finish, options.max_recompute, options.ram_budget,
                         options.align, tiles)
    prog, plan = finish(patched and patched.plan, stages)
    if options.half_math == "native":
        prog = stages.run("instr-native-half", native_half, prog)
    check_memory(prog, plan, options)
    prefix = c_identifier(name)
    out = stages.run("emit", emit, prog, plan, prefix, source, opset, list(inputs), list(outputs), options, header)
    return CompiledModel(prefix, out.c_source, out.h_source, tuple(inputs), tuple(outputs), out.arena_bytes,
                         out.weights_bytes, prog, plan, options, out.weights_blob, patches=patched)


def check_memory(prog: Program, plan: Plan, options: Options) -> None:
    """Refuse, before the C is written, a model whose weights, arena and caller-owned inputs and outputs
    together exceed options.max_memory."""
    weights = sum(b.nbytes for b in prog.buffers if b.kind == "const")
    io = 0 if options.io_in_arena else sum(b.nbytes for b in prog.buffers if b.kind in ("input", "output"))
    check_bytes(f"the model's memory (weights {weights} + arena {plan.size} + inputs and outputs {io})",
                weights + plan.size + io, options.max_memory)


def import_graph(model: str | Path | onnx.ModelProto | TFLiteFile, shapes: dict[str, tuple[int, ...]] | None = None,
                 max_memory: int = MAX_MEMORY, float_io: bool = False) -> Graph:
    """The model's typed graph as imported: an ONNX model's (a path or a ModelProto), or a TFLite file's (a
    path with its identifier, or a TFLiteFile), which takes `float_io` at once: its 8-bit inputs and outputs
    are the file's own (io_quant), or float ones converted inside."""
    model = as_model(model)
    if isinstance(model, TFLiteFile):
        return import_tflite(model.model, shapes, model.path.name, max_memory, float_io)
    source = Path(model).name if isinstance(model, (str, Path)) else "ModelProto"
    return import_model(load(model, max_memory), shapes, source, max_memory)


def compile_model(model: str | Path | onnx.ModelProto | TFLiteFile, name: str = "net",
                  shapes: dict[str, tuple[int, ...]] | None = None, options: Options = Options(),
                  header: str = "", stages: Stages = Stages()) -> CompiledModel:
    """Compile an ONNX model or a TFLite file (import_graph) to C source and header text; the C file includes
    `header` (default: the C symbol prefix made of `name`, plus .h); `stages` runs each pass and step, for
    observers (progress, IR dumps)."""
    model = as_model(model)
    graph = stages.run("import", lambda: import_graph(model, shapes, options.max_memory, options.float_io))
    if options.capacities:
        graph = stages.run("capacities", lower_capacities, graph, options.capacities)
    imported = graph
    if not isinstance(model, TFLiteFile):  # 8-bit inputs and outputs quantized by their neighbours
        graph = stages.run("integer_io", integer_io, graph)
        if options.float_io:
            graph = stages.run("float_io", float_io, graph)
    for rewrite in graph_passes.PIPELINE:
        graph = stages.run(stage_name(rewrite), rewrite, graph)
    if not options.float_io and not isinstance(model, TFLiteFile):
        graph = stages.run("quantized_io", quantized_io, graph)
    inputs = [TensorInfo(n, graph.types[n].shape, graph.types[n].dtype, *graph.io_quant.get(n, ())) for n in graph.inputs]
    outputs = [TensorInfo(n, graph.types[n].shape, graph.types[n].dtype, *graph.io_quant.get(n, ()),
                          counted=graph.types[n].counted) for n in graph.outputs]
    compiled = compile_program(stages.run("lower", lower, graph), name, inputs, outputs, graph.source, graph.opset,
                               options, header, stages)
    return replace(compiled, graph=graph, imported=imported)
