"""cglow's packages in layers: a module imports only from its own layer or the layers below, and no two packages
import each other, even through others. The layers, bottom up, are written down here; a new module or package
of cglow/ must be placed in one."""
from __future__ import annotations

import ast

import pytest

from tests.util import ROOT

PACKAGE = ROOT / "cglow"
LAYERS = [
    {"errors", "names", "version", "c_text", "tiles", "files", "runtime_files"},  # spelling and bookkeeping
    {"options"},
    {"graph", "quantize", "zoo"},                  # the high-level graph: import, passes; the ONNX quantizer
    {"instr"},                                     # the instruction list, its passes and liveness
    {"lower", "alloc", "kernels"},                 # graph to instructions; arena offsets; kernel C
    {"emit_c"},                                    # the C file and header
    {"model_file", "stages", "compiler"},          # the pipeline
    {"tools"},                                     # harnesses, check, bench, info, reports, cross targets
    {"cli", "docs_gen", "__main__", "__init__"},   # the command line, the generated docs, the package's face
]
LAYER = {unit: i for i, units in enumerate(LAYERS) for unit in units}


def unit(module: str, depth: int = 1) -> str:
    """The unit of a module of cglow at a depth: at 1 its top-level module or package ("cglow.graph.ir" ->
    "graph"), at 2 the module or subpackage inside that package ("cglow.graph.quant.fold" -> "graph.quant")."""
    parts = module.split(".")
    return ".".join(parts[1:depth + 1]) if len(parts) > 1 else "__init__"


def imports(depth: int = 1) -> dict[tuple[str, str], list[str]]:
    """(importing unit, imported unit) -> the files where a module of the first imports one of the second."""
    found: dict[tuple[str, str], list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = ("cglow",) + path.relative_to(PACKAGE).with_suffix("").parts
        package = parts[:-1] if parts[-1] != "__init__" else parts[:-1]
        module = ".".join(parts if parts[-1] != "__init__" else parts[:-1])
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package[:len(package) - node.level + 1]
                stem = ".".join(base + ((node.module,) if node.module else ()))
                targets = [f"{stem}.{a.name}" for a in node.names] if not node.module else [stem]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cglow"):
                targets = [node.module]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.startswith("cglow")]
            for target in targets:
                pair = (unit(module, depth), unit(target, depth))
                if pair[0] != pair[1]:
                    found.setdefault(pair, []).append(str(path.relative_to(PACKAGE.parent)))
    return found


def test_every_module_has_a_layer():
    units = {unit(".".join(("cglow",) + p.relative_to(PACKAGE).with_suffix("").parts)) for p in PACKAGE.rglob("*.py")}
    assert units <= set(LAYER), f"place these in a layer of tests/cli/test_layers.py: {sorted(units - set(LAYER))}"


def test_no_import_runs_up_the_layers():
    upward = {f"{a} -> {b} ({', '.join(sorted(set(files)))})" for (a, b), files in imports().items()
              if a in LAYER and b in LAYER and LAYER[b] > LAYER[a]}
    assert not upward, "imports up the layers:\n" + "\n".join(sorted(upward))


@pytest.mark.parametrize("depth", [1, 2], ids=["packages", "inside-packages"])
def test_no_cycle_between_packages(depth):
    """Neither between the layers' units, nor between the modules and subpackages inside one (a subpackage may
    use its parent package's modules, which do not import it back)."""
    pairs = [(a, b) for a, b in imports(depth) if "__init__" not in (a, b)
             and a.split(".")[0] == b.split(".")[0] and not b.endswith(".__init__")] if depth > 1 else list(imports())
    edges: dict[str, set[str]] = {}
    for a, b in pairs:
        edges.setdefault(a, set()).add(b)

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            for nxt in edges.get(todo.pop(), ()):
                if nxt == goal:
                    return True
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return False
    cycles = sorted({tuple(sorted((a, b))) for a, b in pairs if reaches(b, a)})
    assert not cycles, f"packages that import each other (directly or through others): {cycles}"


@pytest.mark.parametrize("forbidden", ["tools", "cli"])
def test_the_compiler_never_imports_the_tools(forbidden):
    below = {u for u, layer in LAYER.items() if layer < LAYER[forbidden]}
    assert not {a for a, b in imports() if b == forbidden and a in below}
