"""`cglow check`: emit a model's C, build it with a test harness, run it on given or seeded random inputs, and
compare every output with a reference runtime (onnxruntime, or the ONNX reference evaluator without it).

The harness is the portable bare-metal one (cglow.tools.harness.baremetal_source: outputs as bit patterns):
on the host a program built with `cc` (cached by a hash); with a cross `--target` (cglow.tools.targets: cortex-m4 ...)
built with the target's compiler and run under its QEMU (cglow.tools.cross). A quantized model's integer inputs reach
the reference as the real values they stand for, and its integer outputs are compared as real values too, in
quantization steps. A model with state (a streaming TFLite file) runs INVOCATIONS times in a row, on seeded
inputs of consecutive seeds (or the given inputs each time), the state kept, and every invocation's outputs are
compared with the reference's over the same sequence."""
from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

import numpy as np
import onnx

from ..compiler import CompiledModel, compile_model
from ..errors import CglowError, reason
from ..graph.ir import shape_text
from ..model_file import TFLiteFile, litert_reals, open_model
from ..options import Options
from . import cross
from .bench import build_executable, compiler_error
from .harness import baremetal_source, parse_output_bits, run_harness
from .host import STRICT_FLAGS, sources
from .reference import difference, reference_outputs, reference_feeds, seeded_inputs
from .targets import TARGETS
from .trace import compare, describe as describe_traced, producers, read_trace, traced_source, with_outputs

if TYPE_CHECKING:
    from ..emit_c.emit import TensorInfo

HOST_OPT_FLAGS = ("-O2",)
INVOCATIONS = 4  # of a model with state


def describe(info: TensorInfo) -> str:
    """An input or output as `name' dtype[shape], with a quantized one's scale and zero point."""
    text = f"'{info.name}' {info.dtype.name}{shape_text(info.shape)}"
    return text if info.scale is None else f"{text} (scale {info.scale:.6g}, zero point {info.zero_point})"


def read_input(path: str, info: TensorInfo) -> np.ndarray:
    """The .npy file for one input, in its dtype: float values for a quantized input are quantized with its
    scale and zero point; other values must convert within their kind (float64 to float32, int64 to int8...)."""
    try:
        x = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise CglowError(f"--input {path}: not a readable .npy file ({reason(exc)})") from None
    if not isinstance(x, np.ndarray):
        raise CglowError(f"--input {path}: holds several arrays; save one array per file with numpy.save")
    if x.shape != info.shape:
        raise CglowError(f"--input {path}: shape {shape_text(x.shape)} for the input {describe(info)}; "
                         f"save an array of that shape")
    if info.scale is not None and np.issubdtype(x.dtype, np.floating):
        limits = np.iinfo(info.dtype)
        return np.clip(np.rint(x / info.scale) + info.zero_point, limits.min, limits.max).astype(info.dtype)
    if not np.can_cast(x.dtype, info.dtype, "same_kind"):
        raise CglowError(f"--input {path}: {x.dtype.name} values for the input {describe(info)}; save the array "
                         f"as {info.dtype.name}")
    return np.ascontiguousarray(x, dtype=info.dtype)


def read_inputs(paths: list[str], compiled: CompiledModel) -> list[np.ndarray]:
    if len(paths) != len(compiled.inputs):
        names = ", ".join(f"'{t.name}'" for t in compiled.inputs)
        raise CglowError(f"--input given {len(paths)} times; the model's inputs are {names}: pass one .npy file per "
                         f"input, in that order")
    return [read_input(path, info) for path, info in zip(paths, compiled.inputs)]


def host_run(compiled: CompiledModel, runs: list[list[np.ndarray]], cc: str, opt_flags: tuple[str, ...],
             traced: str = "") -> tuple[str, str]:
    """How the C was built, and what the program printed: the model and the harness on each input set of `runs`
    in turn, a host program. With `traced` (the model's C with tracing, cglow.tools.trace), that C and the harness
    that prints what it hands over."""
    flags = (*STRICT_FLAGS, *opt_flags)  # after the strict flags: -Wno-... can relax them
    main = baremetal_source(compiled, runs[0], bool(traced), runs[1:])
    files = {**sources(compiled), f"{compiled.name}_main.c": main}
    if traced:
        files[f"{compiled.name}.c"] = traced
    return f"built with {cc} {' '.join(flags)}", run_harness(build_executable(files, cc, flags))


def host_outputs(compiled: CompiledModel, runs: list[list[np.ndarray]], cc: str,
                 opt_flags: tuple[str, ...]) -> tuple[str, list[list[np.ndarray]]]:
    """How the C was built, and each invocation's outputs (host_run)."""
    how, stdout = host_run(compiled, runs, cc, opt_flags)
    return how, parse_output_bits(stdout, compiled)


def target_run(compiled: CompiledModel, runs: list[list[np.ndarray]], name: str, opt_flags: tuple[str, ...],
               traced: str = "") -> tuple[str, cross.Run]:
    """How the C was built and run, and the run: the bare-metal harness on each input set of `runs` in turn,
    under the target's emulator in one start (with `traced`, as host_run)."""
    target = TARGETS[name]
    missing = [tool for tool in target.tools if shutil.which(tool) is None]
    if missing:
        raise CglowError(f"--target {name} builds with {target.cc} and runs under {target.run[0]}: "
                         f"{', '.join(missing)} not found; install them, or check on the host without --target")
    opt_flags = opt_flags or cross.OPT_FLAGS
    try:
        image = cross.build_image(compiled, runs[0], target, opt_flags, traced, runs[1:])
    except RuntimeError as exc:
        raise compiler_error(target.cc, (*opt_flags, *target.cflags), exc) from None
    return (f"built with {target.cc} {' '.join((*opt_flags, *target.cflags))} and the strict flags, run on "
            f"{target.board} under {target.run[0]}"), cross.run_image(image, compiled, target, count=False)


def target_outputs(compiled: CompiledModel, runs: list[list[np.ndarray]], name: str,
                   opt_flags: tuple[str, ...]) -> tuple[str, list[list[np.ndarray]]]:
    """How the C was built and run, and each invocation's outputs (target_run)."""
    how, run = target_run(compiled, runs, name, opt_flags)
    return how, run.invocations


def check_model(path: str, shapes: dict[str, tuple[int, ...]], options: Options, input_files: list[str],
                seed: int, cc: str, opt_flags: tuple[str, ...], tolerance: float, max_steps: float,
                all_tensors: bool = False) -> int:
    """`cglow check`: print how far each output of the model's C is from the reference (at each of INVOCATIONS
    invocations in a row, for a model with state); 1 when one is further than `tolerance` (of its scale) or, for
    a quantized output, `max_steps` quantization steps. With `all_tensors`, every graph value that a kernel
    writes whole is compared too (cglow.tools.trace), and the first that departs is named."""
    model = open_model(path, options.max_memory)
    if all_tensors and isinstance(model, TFLiteFile):
        raise CglowError("--all-tensors compares the tensors of ONNX models only; check the .tflite file without it")
    compiled = compile_model(model, "net", shapes, options)
    count = INVOCATIONS if compiled.plan.state_bytes else 1
    given = read_inputs(input_files, compiled) if input_files else None
    runs = [seeded_inputs(compiled, seed + k) if given is None else given for k in range(count)]
    if isinstance(model, TFLiteFile):
        feeds, (runtime, want) = None, litert_reals(model, runs)
    else:  # an ONNX model keeps no state: one invocation
        feeds = reference_feeds(model, compiled, runs[0])
        runtime, outputs = reference_outputs(model, feeds)
        want = [outputs]
    how, got = (target_outputs(compiled, runs, options.target, opt_flags) if options.target in TARGETS
                else host_outputs(compiled, runs, cc, opt_flags or HOST_OPT_FLAGS))
    source = f"inputs from {', '.join(input_files)}" if input_files else f"seeded random inputs (seed {seed})"
    if count > 1:
        state = f"{count} invocations in a row, the state kept from one to the next"
        source = (f"inputs from {', '.join(input_files)} (in each of {state})" if input_files else
                  f"seeded random inputs (seeds {seed} to {seed + count - 1}: {state})")
    print(f"cglow check {path}: {len(compiled.program.instrs)} kernels (--target {options.target}), {how}; "
          f"{source}; reference {runtime}")
    departure = check_tensors(model, compiled, runs[0], feeds, options.target, cc, opt_flags, tolerance,
                              max_steps) if all_tensors else None
    failed: dict[str, list[int]] = {}  # output name -> the invocations (from 1) where it departs
    for k, (got_k, want_k) in enumerate(zip(got, want), 1):
        at = f"invocation {k}, " if count > 1 else ""
        for info, g, w in zip(compiled.outputs, got_k, want_k):
            d = difference(model, info, g, w)
            verdict = "ok" if d.ok(tolerance, max_steps) else "MISMATCH"
            print(f"{at}output {describe(info)}: {d.text()} ({verdict})")
            if verdict != "ok":
                failed.setdefault(info.name, []).append(k)
    names = ", ".join(f"'{name}'" + (f" in invocation{'s' * (len(ks) > 1)} {', '.join(map(str, ks))}"
                                     if count > 1 else "") for name, ks in failed.items())
    quantized = any(t.scale is not None or w.dtype.kind in "iu" and w.dtype.itemsize == 1
                    for t, w in zip(compiled.outputs, want[0]))
    limits = f"within {tolerance:g} of its scale" + (f", or {max_steps:g} quantization steps for a quantized "
                                                     f"output" if quantized else "")
    if departure:
        print(f"check: MISMATCH: the first tensor that departs is {departure} (tolerance: {limits})")
    elif failed and all_tensors:
        print(f"check: MISMATCH on {names}, though no traced tensor departs: the compiler built the C "
              f"with tracing differently (tolerance: {limits})")
    elif failed:
        print(f"check: MISMATCH on {names} (tolerance: {limits}); --all-tensors finds the first tensor "
              f"that departs")
    else:
        print(f"check: passed: every {'tensor and ' if all_tensors else ''}output"
              f"{' of every invocation' if count > 1 else ''} {limits}")
    return 1 if failed or departure else 0


def check_tensors(model: onnx.ModelProto, compiled: CompiledModel, inputs: list[np.ndarray],
                  feeds: dict[str, np.ndarray], target: str, cc: str, opt_flags: tuple[str, ...], tolerance: float,
                  max_steps: float) -> str:
    """Print every traced value against the reference's, in the order the kernels run; the first that departs,
    in words (empty when none does)."""
    source, functions = traced_source(compiled)
    stdout = target_run(compiled, [inputs], target, opt_flags, source)[1].stdout if target in TARGETS else \
        host_run(compiled, [inputs], cc, opt_flags or HOST_OPT_FLAGS, source)[1]
    traced = read_trace(stdout, compiled, functions)
    made_by = producers(model)
    traced = [t for t in traced if t.name in made_by]
    extended = with_outputs(model, list(dict.fromkeys(t.name for t in traced)))
    _, values = reference_outputs(extended, feeds)
    want = {o.name: v for o, v in zip(extended.graph.output, values)}
    compared = [compare(t, np.asarray(want[t.name]), made_by[t.name], tolerance, max_steps) for t in traced]
    tiled = compiled.patches and f", or computed in tiles from '{compiled.patches.nodes[0]}' to " \
        f"'{compiled.patches.nodes[-1]}' (--ram-budget with room for whole tensors traces them)"
    print(f"every tensor a kernel writes whole, in the order the kernels run ({len({t.name for t in traced})} of the "
          f"{len(made_by)} tensors that the model's nodes compute; the others are fused into kernels or are views"
          f"{tiled or ''}):")
    for c in compared:
        print(f"  {describe_traced(c)}")
    at = next((i for i, c in enumerate(compared) if c.departs), None)
    if at is None:
        return ""
    first = compared[at]
    last_ok = next((c.traced.kernel for c in reversed(compared[:at]) if c.verdict == "ok"), -1)
    ran = list(dict.fromkeys(functions[last_ok + 1:first.traced.kernel + 1]))  # since the last value that agreed
    return (f"'{first.traced.name}' of node '{first.node.name}' ({first.node.op_type}), written by "
            f"{', '.join(ran)}: {first.text}")
