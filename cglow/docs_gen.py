"""The generated reference pages: docs/ops.md from the op registry and docs/options.md from the command line's
parser. `python -m cglow.docs_gen [DIR]` (`make docs`) writes them into DIR (default: docs); tests/cli/test_docs.py
checks that the committed pages are current."""
from __future__ import annotations

import argparse
import ast
import inspect
from pathlib import Path
import sys
import textwrap

import numpy as np

REGENERATE = "make docs (or: python -m cglow.docs_gen docs)"
HEADER = "<!-- Generated from {} by `make docs`: do not edit; regenerate after changing it. -->\n"
INTEGER = "integer kernel: int32 accumulation, per-channel requantization, a Relu or Clip after it is the clamp"
FOLDED = "always folded at compile time: its output depends only on shapes or constant inputs"
CONTROL_FLOW = "compiled as copies of its subgraphs at import (graph/control_flow.py)"
INT8_FORMS = {  # OpSpec.int8 -> what the op becomes between DequantizeLinear and QuantizeLinear
    "float": "float", "conv": INTEGER, "gemm": INTEGER,
    "binary": "integer kernel: fixed-point rescaling of both inputs, a Relu or Clip after it is the clamp",
    "average": "integer kernel: int32 sum, requantized (AveragePool: when no window reaches into the padding)",
    "mean": "integer kernel: int32 sum over the reduced axes, requantized",
    "batchnorm": "integer per-channel requantization, a Relu or Clip after it is the clamp",
    "table": "a 256-entry table computed at compile time",
    "movement": "moves the 8-bit values (inputs of another scale or zero point requantized first)",
    "softmax": "integer kernel along the last axis: a table of the 256 exponentials, int64 sums",
}


def _first_opsets() -> dict[str, int]:
    """The first opset of each op of the default ONNX domain."""
    from onnx import defs
    first: dict[str, int] = {}
    for schema in defs.get_all_schemas_with_history():
        if schema.domain == "":
            first[schema.name] = min(first.get(schema.name, schema.since_version), schema.since_version)
    return first


def _types(op: str, rule, opset: int) -> str:
    """*float32* where the shape rule refuses every non-float element type (graph/registry.py's
    require_float), *float32, 8-bit* where it takes int8 and uint8 besides, else *as ONNX*."""
    from .graph.ir import Node, TensorType
    from .graph.registry import Args

    def refuses(dtype) -> bool:
        node = Node(op, "probe", ("x0", "x1", "x2"), ("y",))
        try:
            rule(Args(node, (TensorType(np.dtype(dtype), (1, 2, 4, 4)),) * 3, (None,) * 3, opset))
        except Exception as exc:  # noqa: BLE001  (a probe: any other failure says nothing of the types)
            return str(exc).endswith("supported for float32 only")
        return False
    if not refuses(np.int32) or not refuses(np.bool_):
        return "as ONNX"
    return "float32, 8-bit" if not refuses(np.int8) and not refuses(np.uint8) else "float32"


def _syntax(fn) -> ast.FunctionDef:
    return ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0]


def _called_functions(fn) -> list[ast.FunctionDef]:
    """The syntax of the function and of the functions of its module that it calls, transitively."""
    module = sys.modules[fn.__module__]
    found, todo = {}, [fn]
    while todo:
        f = todo.pop()
        if f not in found:
            found[f] = _syntax(f)
            names = sorted({n.func.id for n in ast.walk(found[f]) if isinstance(n, ast.Call)
                            and isinstance(n.func, ast.Name)})
            todo += [g for g in (getattr(module, name, None) for name in names)
                     if inspect.isfunction(g) and g.__module__ == fn.__module__]
    return list(found.values())


def _text(node: ast.expr) -> str | None:
    """A string literal or f-string as text, each replacement field as `...`."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "..." for v in node.values)
    return None


def _limitations(rule) -> list[str]:
    """What the shape rule (and its module's helpers that it calls) states it does not support, and the inputs
    it reads as constants (Args.const's `what`, given directly or through a helper's parameter)."""
    functions = _called_functions(rule)
    through = {"const": 1}  # function name -> the position of its argument that names a constant input
    for f in functions:
        params = [a.arg for a in f.args.args]
        for call in ast.walk(f):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "const" \
                    and len(call.args) == 2 and isinstance(call.args[1], ast.Name) and call.args[1].id in params:
                through[f.name] = params.index(call.args[1].id)
    notes, constants = [], []
    for node in (n for f in functions for n in ast.walk(f)):
        if isinstance(node, ast.Call):
            callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            at = through.get(callee, len(node.args))
            if at < len(node.args) and _text(node.args[at]):
                constants.append(_text(node.args[at]))
        elif isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            message = (_text(node.exc.args[0]) or "").split(": ", 1)[-1]
            if "not supported" in message:
                notes.append(message)
    if constants:
        notes.append("constant inputs: " + ", ".join(dict.fromkeys(constants)))
    return list(dict.fromkeys(notes))


def render_ops() -> str:
    """docs/ops.md: every op cglow imports, from the registry."""
    from .graph.control_flow import LIMITS
    from .graph.onnx_import import OPSETS
    from .graph.quant.qoperator import REWRITES
    from .graph.registry import OPS, onnx_ops
    first, last = _first_opsets(), OPSETS.stop - 1
    lines = [HEADER.format("the op specifications (cglow/lower/ops/, OpSpec in cglow/graph/registry.py)"),
             "# Supported operators\n",
             (f"cglow compiles models of opsets {OPSETS.start} to {last} of the default ONNX domain (older models "
              f"from opset 7 are upgraded to opset {OPSETS.start} with `onnx.version_converter`) with static shapes "
              "(a symbolic first dimension is taken as 1; `--shape` pins the others). The element types are float32, "
              "bool and the 8- to 64-bit integers, each op where ONNX allows them (*as ONNX*), except the ops marked "
              "*float32* (and *8-bit*: int8 and uint8 too). float16, bfloat16, float8 (E4M3FN, E4M3FNUZ, E5M2, "
              "E5M2FNUZ, E8M0), float4 (E2M1: one a byte, in its low bits) and float64 tensors are stored as such "
              "(their bits, `uint16_t` or `uint8_t` in C; float64 "
              "as `double`: inputs, outputs, casts) and computed in float32, each op's result rounded to its type "
              "(graph/stored_types.py; a float64 model is told so); a *float32* op takes them so. The 4- and 2-bit "
              "integers are stored one a byte (their bits in its low bits, as NumPy's ml_dtypes keeps them: "
              "`uint8_t`; constant 4-bit values that a DequantizeLinear reads, two a byte where their last dim pairs "
              "them) and computed in int8 or uint8. Constant subgraphs are folded at compile time whatever their ops. "
              "The outputs whose length depends on the data (NonZero's, Compress's with a run-time condition, Unique's, NonMaxSuppression's) have a static "
              "capacity (`emit --capacity` lowers it) and a count that `net_run` returns ([the C API]"
              "(c-api.md#outputs-of-run-time-length)); such "
              "a value may only reach the graph's outputs, through a Cast or an Identity at most.\n"),
             "- **opsets**: the opsets of the default domain in which cglow takes the op.",
             ("- **int8**: what the op becomes in a quantized (QDQ) model when its inputs come from "
              "DequantizeLinear and its output goes to QuantizeLinear; *float* means it runs in float between "
              "them, as the model says."),
             ("- **limitations**: what the op's shape rule refuses by name (each refusal is one `cglow: error` "
              "line naming the node), and the inputs it needs as constants (cglow compiles static graphs).\n"),
             "| op | domain | opsets | types | int8 | limitations |", "|---|---|---|---|---|---|"]
    for op in sorted(set(onnx_ops()) | set(REWRITES) | set(LIMITS)):
        spec = OPS.get(op)
        domain = REWRITES[op][0] if op in REWRITES else ""
        opsets = "any" if domain else f"{max(first[op], OPSETS.start)}-{last}"
        if op in REWRITES:
            types, int8, notes = "8-bit", "rewritten at import to DequantizeLinear, the float op, QuantizeLinear", []
        elif op in LIMITS:
            types, int8, notes = "as ONNX", "as its subgraphs' ops", [CONTROL_FLOW] + LIMITS[op]
        elif spec.lower is None:
            types, int8, notes = "as ONNX", "-", [FOLDED]
        else:
            types = _types(op, spec.shape, last)
            int8 = "ONNX quantization op" if spec.shape.__module__.endswith(".quant") else INT8_FORMS[spec.int8]
            notes = _limitations(spec.shape)
        lines.append(f"| {op} | {domain or 'ai.onnx'} | {opsets} | {types} | {int8} | {'; '.join(notes)} |")
    return "\n".join(lines + _function_ops(set(onnx_ops())) + _tflite_builtins()) + "\n"


def _function_ops(registered: set[str]) -> list[str]:
    """The ops of the default and preview domains that cglow compiles as their ONNX function bodies
    (graph/functions.py), less those it decomposes itself (graph/decompose.py) and the families out of its reach
    (tools/coverage.py)."""
    import onnx
    from .graph.decompose import DECOMPOSITIONS, MODES
    from .graph.functions import function_ops
    from .tools.coverage import OUT_OF_REACH
    ops = sorted(function_ops() - registered - set(DECOMPOSITIONS) - set().union(*OUT_OF_REACH.values()))
    return ["\n## Ops compiled as their function bodies\n",
            ("These ops have no lowering of their own: ONNX defines each as a function of other ops, and cglow "
             "replaces each node by that body at import (at the model's opset), so that they compile wherever the "
             "ops of the body do (docs/coverage.md shows which cases pass):\n"),
            ", ".join(f"{op} (ai.onnx.preview)" if onnx.defs.has(op, "ai.onnx.preview") else op for op in ops) + ".",
            ("\nThese are built of other ops by cglow itself (graph/decompose.py): "
             f"{', '.join(f'{op} (in {MODES[op][0]})' if op in MODES else op for op in sorted(DECOMPOSITIONS))}.")]


def _tflite_builtins() -> list[str]:
    """The TFLite builtins cglow translates (graph/tflite/build.py's registry), each with what its translator
    refuses by name."""
    from .graph.tflite import importer  # noqa: F401  (fills TRANSLATORS)
    from .graph.tflite.build import TRANSLATORS
    lines = ["\n## TFLite builtins\n",
             ("A .tflite file (recognized by its TFL3 identifier) is translated into the same graph, NHWC kept "
              "(the transposes around convolutions are views, and cancel between them). float32 and 8-bit "
              "operators, per-tensor and per-channel, compute as LiteRT's reference kernels do (TFLite Micro's "
              "arithmetic): 8-bit results to the bit. Any other builtin is named, with its operator indices, in "
              "one error line.\n"),
             "| builtin | translated in | limitations |", "|---|---|---|"]
    for op in sorted(TRANSLATORS):
        fn = TRANSLATORS[op]
        notes = [n for f in _called_functions(fn) for n in ast.walk(f) if isinstance(n, ast.Raise)
                 and isinstance(n.exc, ast.Call) and n.exc.args and "not supported" in (_text(n.exc.args[0]) or "")]
        text = "; ".join(dict.fromkeys((_text(n.exc.args[0]) or "").split(": ", 1)[-1] for n in notes))
        lines.append(f"| {op} | {fn.__module__.rsplit('.', 1)[-1]}.py | {text} |")
    return lines


def _value(action: argparse.Action, formatter: argparse.HelpFormatter) -> str:
    """What the option takes on the command line ("" for a flag)."""
    if action.nargs == 0:
        return ""
    metavar = formatter._metavar_formatter(action, action.dest.upper())(1)[0]
    return metavar + (" ..." if action.nargs in ("+", "*") else "")


def _option_row(action: argparse.Action, formatter: argparse.HelpFormatter) -> str:
    """One table row: the option's names, the value it takes, its help (with %(default)s expanded)."""
    names = ", ".join(f"`{s}`" for s in action.option_strings) or f"`{action.dest}`"
    value = _value(action, formatter) if action.option_strings else ""
    text = formatter._expand_help(action) if action.help else ""
    extra = [word for word, flag in (("required", action.required and action.option_strings),
                                     ("repeatable", isinstance(action, (argparse._AppendAction,
                                                                        argparse._ExtendAction)))) if flag
             and word not in text]
    text += f" ({', '.join(extra)})" if extra else ""
    cells = (names, f"`{value}`" if value else "", text)
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def _synopsis(sub: argparse.ArgumentParser, formatter: argparse.HelpFormatter) -> str:
    """The command with its positional arguments and required options, e.g. `cglow emit MODEL -o OUTPUT`."""
    words = [sub.prog] + [_value(a, formatter).upper() for a in sub._actions if not a.option_strings]
    words += [f"{a.option_strings[0]} {_value(a, formatter)}" for a in sub._actions if a.option_strings and a.required]
    return " ".join(words + ["[options]"])


def render_options() -> str:
    """docs/options.md: every subcommand of the command line and its options, from its parser."""
    from .cli import build_parser
    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    helps = {choice.dest: choice.help for choice in commands._choices_actions}
    lines = [HEADER.format("the command line's parser (cglow/cli.py, build_parser)"), "# Command-line options\n",
             (f"{parser.description} `python -m cglow` is the same command. Every command takes `-h` "
              "(`--help`). A bad model or option prints one line `cglow: error: ...` on stderr and exits with "
              "status 2, writing no file.\n")]
    lines += [f"- [`cglow {name}`](#cglow-{name}): {helps[name]}" for name in commands.choices]
    for name, sub in commands.choices.items():
        formatter = sub.formatter_class(prog=sub.prog)
        lines += [f"\n## cglow {name}\n", f"{helps[name][0].upper()}{helps[name][1:]}.\n",
                  f"```\n{_synopsis(sub, formatter)}\n```\n", "| option | value | description |", "|---|---|---|"]
        lines += [_option_row(a, formatter) for a in sub._actions if not isinstance(a, argparse._HelpAction)]
        lines += [f"\n{sub.epilog}"] if sub.epilog else []
    return "\n".join(lines) + "\n"


PAGES = {"ops.md": render_ops, "options.md": render_options}


def main(argv: list[str] | None = None) -> int:
    """Write the pages into the folder named by the first argument (default: docs)."""
    args = sys.argv[1:] if argv is None else argv
    folder = Path(args[0] if args else "docs")
    folder.mkdir(parents=True, exist_ok=True)
    for page, render in PAGES.items():
        (folder / page).write_text(render())
        print(f"cglow: wrote {folder / page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
