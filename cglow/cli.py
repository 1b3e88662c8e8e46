"""The `cglow` command line. A user error (the model, its files or the options) prints one line
`cglow: error: ...` and exits with status 2; a bug in cglow prints one line `cglow: internal error: ...`
and exits with status 3. Either way no output file is written: they are all renamed into place at the end."""
from __future__ import annotations

import argparse
from dataclasses import replace
import json
import os
from pathlib import Path
import re
import shlex
import sys
import time
from typing import TYPE_CHECKING
import warnings

from .errors import CglowError, Notice, one_line, reason
from .files import write_files
from .options import MAX_MEMORY, Options

if TYPE_CHECKING:
    import onnx


def parse_shape(text: str) -> tuple[str, tuple[int, ...]]:
    name, sep, dims = text.rpartition("=")
    try:
        shape = tuple(int(d) for d in dims.split(","))
    except ValueError:
        shape = ()
    if not sep or not name or not shape or min(shape) < 1:
        raise CglowError(f"--shape {text}: expected NAME=D1,D2,... with positive integers, e.g. input=1,3,224,224")
    return name, shape


def parse_capacity(text: str) -> tuple[str, int]:
    """--capacity NAME=N: the name of an output of run-time length and the most entries to store (graph/capacity.py)."""
    name, sep, count = text.rpartition("=")
    if not sep or not name or not re.fullmatch(r"[+-]?[0-9]+", count.strip()):
        raise CglowError(f"--capacity {text}: expected NAME=N, the name of an output of run-time length and the most "
                         f"entries to store, e.g. indices=100")
    return name, int(count)


def parse_bytes(text: str) -> int:
    """A byte count: an integer with an optional K, M or G suffix (powers of 1024)."""
    number, unit = (text[:-1], text[-1].upper()) if text[-1:].upper() in ("K", "M", "G") else (text, "")
    try:
        value = int(number) << {"": 0, "K": 10, "M": 20, "G": 30}[unit]
    except ValueError:
        value = 0
    if value < 1:
        raise CglowError(f"--max-memory {text}: expected a positive number of bytes, e.g. 512M or 2G")
    return value


def parse_flags(text: str) -> tuple[str, ...]:
    """Compiler flags, split as a shell splits words."""
    try:
        return tuple(shlex.split(text))
    except ValueError as exc:
        raise CglowError(f"--cflags {text}: {exc}; give the flags as one argument, e.g. "
                         f"--cflags='-O3 -march=native'") from None


def cmd_emit(args: argparse.Namespace) -> None:
    from .compiler import compile_model
    from .tools.dump_ir import IRDump
    from .tools.progress import Progress
    from .stages import Stages
    out = Path(args.output)
    if out.suffix != ".c":
        raise CglowError(f"-o {out}: the output must be a .c file (the header is written beside it)")
    if not re.fullmatch(r"[A-Za-z0-9_.+-]+", out.stem):
        raise CglowError(f"-o {out}: the file name may hold only letters, digits and _ . + - (the .c file "
                         f"includes the header by name)")
    weights = Path(args.weights_file) if args.weights_file else None
    taken = [out, out.with_suffix(".h")] + ([Path(args.report)] if args.report else [])
    if weights and weights.resolve() in [path.resolve() for path in taken]:
        raise CglowError(f"--weights-file {weights}: the weights need a file of their own, not {weights.name}")
    if args.dump_ir and Path(args.dump_ir).exists() and not Path(args.dump_ir).is_dir():
        raise CglowError(f"--dump-ir {args.dump_ir}: not a folder; give a folder for the IR files (it is created)")
    options = replace(options_of(args), external_weights=weights is not None)
    start = time.perf_counter()
    model, quantized = args.model, None
    if args.int8:
        from .graph.onnx_import import load
        model, quantized = quantize_with_options(args, lambda: load(args.model, options.max_memory))
    elif any(getattr(args, key) for key in CALIBRATION_OPTIONS):
        raise CglowError("--calib, --method, --percentile, --per-tensor and --keep-float apply only with --int8")
    dump = IRDump()
    with Progress(sys.stderr) as progress:  # on a terminal only
        compiled = compile_model(model, name=args.name or out.stem, shapes=dict(args.shape or []), options=options,
                                 header=out.with_suffix(".h").name,
                                 stages=Stages(progress, *([dump] if args.dump_ir else [])))
        files: dict[Path, str | bytes] = {out.with_suffix(".h"): compiled.h_source, out: compiled.c_source}
        if weights:
            files[weights] = compiled.weights_blob
        if args.report:
            from .tools.memory import analyze
            from .tools.report import render_report
            progress.start("report")
            files[Path(args.report)] = render_report(compiled, analyze(compiled), Path(args.model).name)
    if args.dump_ir:
        files.update(dump.files(Path(args.dump_ir)))
    write_files(files)
    if quantized:
        print(f"cglow: quantized the model in memory: {quantized}")
    listing = [f"{out} ({len(compiled.c_source.encode()) // 1024} KiB)", str(out.with_suffix(".h"))]
    listing += [str(weights)] if weights else []
    print(f"cglow: wrote {', '.join(listing[:-1])} and {listing[-1]}: {len(compiled.program.instrs)} kernels, "
          f"arena {compiled.arena_bytes} bytes, weights {compiled.weights_bytes} bytes, "
          f"in {time.perf_counter() - start:.2f} s")
    if args.report:
        print(f"cglow: wrote the report {args.report}")
    if args.dump_ir:
        print(f"cglow: wrote the IR after each of {len(dump.texts)} stages to {args.dump_ir}")


CALIBRATION_OPTIONS = ("calib", "method", "percentile", "per_tensor", "keep_float")


def cmd_quantize(args: argparse.Namespace) -> None:
    from .graph.onnx_import import load
    model, summary = quantize_with_options(args, lambda: load(args.model))
    write_files({Path(args.output): model.SerializeToString()})
    print(f"cglow: wrote {args.output}: {summary}")


def quantize_with_options(args: argparse.Namespace, loaded) -> tuple[onnx.ModelProto, str]:
    """The QDQ model of the model `loaded()` reads per the calibration options, and a summary of what was
    quantized."""
    from collections import Counter
    from .graph.tflite.reader import is_tflite
    from .quantize import load_calibration, quantize, weight_bytes
    if is_tflite(args.model):
        raise CglowError(f"{args.model}: a .tflite file keeps the quantization it was converted with; cglow "
                         f"quantizes ONNX models")
    if not args.calib:
        raise CglowError("quantizing needs calibration inputs: --calib INPUTS.npz (one array per model input, "
                         "samples stacked on a new leading axis)")
    if args.percentile is not None and args.method != "percentile":
        raise CglowError("--percentile applies only with --method percentile")
    try:
        percentile = float(args.percentile or 99.99)
    except ValueError:
        raise CglowError(f"--percentile {args.percentile}: expected a number above 0 and at most 100") from None
    model = loaded()
    result = quantize(model, load_calibration(args.calib, model), args.method or "minmax", percentile,
                      not args.per_tensor, args.keep_float or ())
    kept = ", ".join(op if n == 1 else f"{op} x{n}" for op, n in sorted(Counter(result.float_ops).items()))
    return result.model, (f"{len(result.quantized_ops)} ops quantized to int8, {len(result.float_ops)} kept in float"
                          f"{f' ({kept})' if kept else ''}, weights {weight_bytes(model)} -> "
                          f"{weight_bytes(result.model)} bytes")


def add_calibration_arguments(parser: argparse.ArgumentParser) -> None:
    """The calibration options: what quantize and emit --int8 share."""
    parser.add_argument("--calib", metavar="INPUTS.npz",
                        help="calibration inputs: one array per model input named after it (any name for a "
                             "single input), samples stacked on a new leading axis")
    parser.add_argument("--method", metavar="minmax|percentile|entropy",
                        help="how activation ranges are set: min/max (default), a percentile of |x|, or the "
                             "KL-divergence (entropy) threshold")
    parser.add_argument("--percentile", metavar="P", help="with --method percentile: the percentile of |x| "
                                                          "(default: 99.99)")
    parser.add_argument("--per-tensor", action="store_true",
                        help="one scale per weight tensor instead of one per output channel")
    parser.add_argument("--keep-float", nargs="+", action="extend", metavar="OP_OR_NODE",
                        help="op types or node names to compute in float (give them after the model: the list "
                             "takes every word that follows)")


def cmd_info(args: argparse.Namespace) -> int:
    from .tools.info import info_lines, model_info
    info = model_info(args.model, dict(args.shape or []), options_of(args))
    print(json.dumps(info, indent=2) if args.json else "\n".join(info_lines(info, args.target)))
    return 0 if info["supported"] else 1


def cmd_check(args: argparse.Namespace) -> int:
    from .tools.check import check_model
    return check_model(args.model, dict(args.shape or []), options_of(args), args.input or [], args.seed, args.cc,
                       args.cflags or (), args.tolerance, args.max_steps, args.all_tensors)


def cmd_bench(args: argparse.Namespace) -> int:
    from .tools.bench import bench_model
    return bench_model(args.model, dict(args.shape or []), options_of(args), args.cc, args.cflags, args.samples,
                       args.sample_ms, args.warmup_ms, args.tolerance)


def add_model_arguments(parser: argparse.ArgumentParser, target: str = "generic", target_note: str = "") -> None:
    """The model, its input shapes, the target's tiles and the limits: what every command on a model shares."""
    parser.add_argument("model", help="the .onnx file")
    parser.add_argument("--shape", action="append", type=argument_type(parse_shape), metavar="NAME=D1,D2,...",
                        help="static shape of an input with symbolic dimensions (repeatable)")
    parser.add_argument("--target", default=target, metavar="NAME",
                        help=f"register tile sizes for this target: generic, host (the machine cglow runs on), "
                             f"x86-avx2, x86-avx512, x86-avx512-vnni, aarch64, rv64gcv (vector units); cortex-m3, "
                             f"cortex-m4, cortex-m7, "
                             f"cortex-m33, cortex-m55, riscv32, riscv64 (scalar); the C stays portable C99 for "
                             f"every target (default: {target}){target_note}")
    parser.add_argument("--float-io", action="store_true",
                        help="a quantized model keeps float inputs and outputs, (de)quantized inside net_run (default: "
                             "the 8-bit integers, with NET_INPUT_i_SCALE and _ZERO_POINT in the header)")
    parser.add_argument("--half-math", choices=("float", "native"), default="float",
                        help="float16 arithmetic: in float32, each op's result rounded to float16 (float), or in the "
                             "target's half type where --target has one (native: cortex-m55, aarch64 built with +fp16; "
                             "the same file computes in float32 elsewhere) (default: float)")
    parser.add_argument("--max-memory", type=argument_type(parse_bytes), default=MAX_MEMORY, metavar="BYTES",
                        help="refuse a model with a tensor, or weights + arena + inputs and outputs, above this many "
                             "bytes; K, M and G suffixes (default: 1G)")
    parser.add_argument("--max-recompute", type=float, default=0.0, metavar="PERCENT",
                        help="the first layers may run in patches whose overlapping rows are computed again, adding up "
                             "to this share of the model's multiply-accumulates; with 0, only streamed rows (nothing "
                             "computed twice) are used, wherever they lower the arena (default: 0)")
    parser.add_argument("--ram-budget", type=argument_type(parse_bytes), default=None, metavar="BYTES",
                        help="the fastest plan whose arena fits in this many bytes (K, M, G suffixes), running the first "
                             "layers in patches if it must; an error names the smallest arena reachable if none fits")
    parser.add_argument("--unpacked-weights", action="store_true",
                        help="store the weights that fit int4, float16 or bfloat16 as the kernels read them (int8, "
                             "float32): twice the flash for those, no scratch chunk in the arena and no unpacking each "
                             "run (default: stored narrow, unpacked a chunk of output channels at a time)")
    parser.add_argument("--nibble-weights", action="store_true",
                        help="the integer kernels' other weights that fit 4 bits (uint4 of any zero point; layouts "
                             "that no chunk takes; all of them with --unpacked-weights) stored two a byte too: half "
                             "their flash, for arena room to unpack the largest layer's and an unpacking pass each run")


def add_memory_arguments(parser: argparse.ArgumentParser) -> None:
    """The memory layout options of the C API: what emit and info share."""
    parser.add_argument("--align", type=int, default=16, metavar="BYTES",
                        help="alignment of every buffer in the arena, NET_ARENA_ALIGN (default: %(default)s; "
                             "4 is enough on Cortex-M)")
    parser.add_argument("--caller-arena", action="store_true",
                        help="net_run(void *arena, ...): the caller provides the arena (no static array)")
    parser.add_argument("--io-in-arena", action="store_true",
                        help="inputs and outputs live in the arena: RAM is NET_ARENA_BYTES alone")
    parser.add_argument("--capacity", action="append", metavar="NAME=N",
                        help="store at most N entries of the output NAME whose length depends on the data "
                             "(NonZero's, Compress's, Unique's, NonMaxSuppression's), below the most the model can "
                             "give: NET_OUTPUT_i_CAPACITY is N, the count stays the number found (repeatable)")


def options_of(args: argparse.Namespace) -> Options:
    """The compile options; commands without the memory layout options (check, bench) take the default API."""
    layout = dict(align=args.align, caller_arena=args.caller_arena, io_in_arena=args.io_in_arena,
                  capacities=tuple(map(parse_capacity, args.capacity or ()))) if hasattr(args, "align") else {}
    return Options(target=args.target, max_memory=args.max_memory, float_io=args.float_io,
                   half_math=args.half_math, max_recompute=args.max_recompute, ram_budget=args.ram_budget,
                   narrow_weights=not args.unpacked_weights, nibble_weights=args.nibble_weights, **layout)


def cmd_example(args: argparse.Namespace) -> None:
    from .tools.example import run_example
    run_example(Path(args.dir), args.cc)


INFO_EPILOG = (
    "Exit status: 0 when cglow compiles the model; 1 when it cannot (\"supported: no\" and every problem found: "
    "each unsupported op with its nodes, each input without a static shape...; what the file says is still "
    "printed); 2 for bad options or a file that is not a readable ONNX model; 3 for a bug in cglow. MACs: the "
    "multiply-accumulates of the Gemm and Conv kernels. Code (flash), estimated without a compiler "
    "(code_bytes_estimate = code_statements x code_bytes_per_statement): the C statements of the generated "
    "file's distinct functions, a register-tile loop once per iteration on scalar targets (where gcc unrolls it), "
    "times the bytes per statement measured on the zoo models, 9 on scalar targets (Cortex-M, RISC-V) and 17 on "
    "vector ones; 0.6 to 1.3 times the compiled size on those models. Parameters: the initializers' elements.")
CHECK_EPILOG = (
    "Exit status: 0 when every output matches; 1 when one does not; 2 for bad options, a model cglow cannot "
    "compile, a compiler or emulator that is missing or fails on the C; 3 for a bug in cglow. An output's "
    "error is its largest absolute difference from the reference over its scale, the reference's largest "
    "magnitude (however small: outputs of 1e-14 are judged against 1e-14); a quantized model's "
    "8-bit inputs reach the reference as the real values they stand for, and its outputs are compared as "
    "real values, in quantization steps.")


def add_check_parser(sub) -> None:
    check = sub.add_parser("check", help="emit, build and run a model's C and compare its outputs with onnxruntime "
                                         "(or the ONNX reference evaluator)", epilog=CHECK_EPILOG)
    add_model_arguments(check, target_note="; a cross target (cortex-m3, cortex-m4, cortex-m7, cortex-m33, "
                        "cortex-m55, riscv32, riscv64, riscv64-linux, rv64gcv, aarch64-linux) builds with its cross "
                        "compiler and runs under QEMU")
    check.add_argument("--input", action="append", metavar="X.npy",
                       help="an input as a NumPy .npy file, once per model input in their order (default: seeded "
                            "random inputs); float values for a quantized input are quantized with its scale")
    check.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default: %(default)s)")
    check.add_argument("--cc", default=os.environ.get("CC", "cc"),
                       help="host C compiler (default: $CC or cc; a cross target uses its own)")
    check.add_argument("--cflags", type=argument_type(parse_flags), metavar="FLAGS",
                       help="compiler flags in place of -O2 (the default), as one argument: --cflags='-O3 "
                            "-march=native'; they come after the strict warning flags -std=c99 -pedantic -Wall "
                            "-Wextra -Werror -Wdouble-promotion on the host (so -Wno-... relaxes them), before "
                            "them with a cross target")
    check.add_argument("--tolerance", type=float, default=1e-4, metavar="REL",
                       help="largest error of an output, over its scale (default: %(default)g)")
    check.add_argument("--max-steps", type=float, default=2, metavar="N",
                       help="largest error of a quantized output, in quantization steps (default: %(default)g)")
    check.add_argument("--all-tensors", action="store_true",
                       help="compare every tensor that a kernel writes whole with the reference's, in the order "
                            "the kernels run, and name the first that departs: its node, and the C functions that "
                            "wrote it")
    check.set_defaults(run=cmd_check)


def add_bench_parser(sub) -> None:
    bench = sub.add_parser("bench", help="time a model's C on the host against onnxruntime on one thread")
    add_model_arguments(bench, target="host")
    bench.add_argument("--cc", default=os.environ.get("CC", "cc"), help="C compiler (default: $CC or cc)")
    bench.add_argument("--cflags", type=argument_type(parse_flags), default="-O3 -march=native", metavar="FLAGS",
                       help="compiler flags, as one argument: --cflags='-O2' (default: %(default)s); they come after "
                            "the strict warning flags")
    bench.add_argument("--samples", type=int, default=9, help="timed samples of each (default: %(default)s); the "
                                                              "median is printed")
    bench.add_argument("--sample-ms", type=float, default=30.0, help="length of a sample (default: %(default)g)")
    bench.add_argument("--warmup-ms", type=float, default=200.0, help="least warm-up time (default: %(default)g)")
    bench.add_argument("--tolerance", type=float, default=1e-4, metavar="REL",
                       help="largest relative error of an output against onnxruntime (default: %(default)g)")
    bench.set_defaults(run=cmd_bench)


def build_parser() -> argparse.ArgumentParser:
    """Every subcommand and option (docs/options.md is generated from it: `make docs`)."""
    parser = argparse.ArgumentParser(prog="cglow", description="Compile ONNX models to portable C99.")
    sub = parser.add_subparsers(dest="command", required=True)
    emit = sub.add_parser("emit", help="write the C file and header for a model")
    add_model_arguments(emit)
    add_memory_arguments(emit)
    emit.add_argument("-o", "--output", required=True, help="the .c file to write (the .h goes beside it)")
    emit.add_argument("--name", help="C symbol prefix (default: the output file's stem)")
    emit.add_argument("--report", metavar="PLAN.html",
                      help="also write one HTML page: the graph after optimization, the kernels, the memory plan")
    emit.add_argument("--dump-ir", metavar="DIR", help="also write the IR after each compiler pass to DIR, one "
                                                       "numbered text file per pass (for debugging cglow)")
    emit.add_argument("--weights-file", metavar="NET.bin",
                      help="write the weights to this little-endian binary file instead of into the .c file: "
                           "net_run(const void *weights, ...) takes them at run time")
    emit.add_argument("--int8", action="store_true",
                      help="quantize the model to int8 first (QDQ, like `cglow quantize`); needs --calib")
    add_calibration_arguments(emit)
    emit.set_defaults(run=cmd_emit)
    quantize = sub.add_parser("quantize", help="write an int8 QDQ ONNX model from a float model and "
                                               "calibration inputs")
    quantize.add_argument("model", help="the float .onnx file")
    quantize.add_argument("-o", "--output", required=True, help="the QDQ .onnx file to write")
    add_calibration_arguments(quantize)
    quantize.set_defaults(run=cmd_quantize)
    info = sub.add_parser("info", help="print a model's inputs, outputs, ops, MACs, memory and code size, and "
                                       "every problem that keeps cglow from compiling it", epilog=INFO_EPILOG)
    add_model_arguments(info)
    add_memory_arguments(info)
    info.add_argument("--json", action="store_true", help="print one JSON object (for scripts)")
    info.set_defaults(run=cmd_info)
    add_check_parser(sub)
    add_bench_parser(sub)
    example = sub.add_parser("example", help="emit, build and run the bundled keyword-spotting model")
    example.add_argument("--dir", default="build/example", help="where to write the files (default: %(default)s)")
    example.add_argument("--cc", default=os.environ.get("CC", "cc"), help="C compiler (default: $CC or cc)")
    example.set_defaults(run=cmd_example)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with warnings.catch_warnings():  # the libraries' warnings (NumPy casts, ONNX) would break the one line
            warnings.simplefilter("ignore")
            warnings.simplefilter("once", Notice)  # cglow's own, each once
            warnings.showwarning = _print_notice
            status = args.run(args)
    except CglowError as exc:
        print(f"cglow: error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (`cglow info ... | head`): stop quietly, as other tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the final flush must not raise again
        return 1
    except Exception as exc:  # a bug in cglow: one line that says so (CGLOW_TRACEBACK=1 shows where)
        if os.environ.get("CGLOW_TRACEBACK"):
            raise
        print(f"cglow: internal error: {one_line(reason(exc))}; this is a bug in cglow, please report it with the "
              f"model and the command line (no file was written)", file=sys.stderr)
        return 3
    return status or 0


def _print_notice(message, *_) -> None:
    print(f"cglow: notice: {one_line(str(message))}", file=sys.stderr)


def argument_type(parse):
    """An argparse `type` from a parser that raises CglowError: argparse prints the message and exits with 2."""
    def convert(text: str):
        try:
            return parse(text)
        except CglowError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return convert
